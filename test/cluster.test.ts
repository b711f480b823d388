/**
 * The cache and the lock on a real 3-master Redis Cluster: every script touches keys of one
 * hash slot, announcements cross nodes, and resetAll scans every master.
 */
import { describe, expect, it } from 'vitest';
import { createCache, RedisLock } from '../src/index.js';
import { startRedisCluster } from '../tools/redis-server.js';
import { useRedisCluster } from './support/use-redis.js';
import { sleep } from '../tools/basics.js';

const cluster = useRedisCluster(3);


describe('on a Redis Cluster', () => {
  it('coalesces a miss across two caches and serves keys from every slot', async () => {
    const a = createCache({ redis: cluster.client() });
    const b = createCache({ redis: cluster.client() });
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(150);
      return 'clustered';
    };
    const calls = [...Array.from({ length: 20 }, () => a.getOrCompute('shared', loader, 10_000)), ...Array.from({ length: 20 }, () => b.getOrCompute('shared', loader, 10_000))];
    expect(await Promise.all(calls)).toEqual(Array(40).fill('clustered'));
    expect(runs).toBe(1);
    // keys spread over all slots: each one's value, lock and channel share a hash tag
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    for (const k of keys) expect(await a.getOrCompute(k, () => `v-${k}`, 10_000)).toBe(`v-${k}`);
    for (const k of keys) expect(await b.get(k)).toBe(`v-${k}`);
    await a.close();
    await b.close();
  });

  it('locks exclude each other, hand over with a push, and resetAll frees locks on every master', async () => {
    const client = cluster.client();
    const first = new RedisLock(client, 'job');
    const second = new RedisLock(cluster.client(), 'job');
    const t1 = await first.acquire();
    const waiting = second.acquire({ timeout: 5000 });
    await sleep(50);
    await first.release();
    expect(await waiting).toBe(t1 + 1);
    await second.release();
    const held = await Promise.all(Array.from({ length: 12 }, (_, i) => new RedisLock(client, `stuck-${i}`, { autoRenew: false, ttl: 60_000 })).map(async (l) => {
      await l.acquire();
      return l;
    }));
    expect(await RedisLock.resetAll(client)).toBe(12);
    for (const l of held) expect(await l.getOwnerId()).toBeNull();
    for (const l of held) await l.release();
  });

  it('a waiter rides out a cluster outage: its subscription moves back without piling up listeners', async () => {
    const own = await startRedisCluster(3);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const holder = new RedisLock(own.client(), 'outage', { ttl: 60_000, autoRenew: false });
      // Retries CLUSTERDOWN (every 100 ms) while the restarted nodes agree again.
      const waiter = new RedisLock(own.client({ maxRedirections: 300 }), 'outage');
      const held = await holder.acquire();
      const waiting = waiter.acquire({ timeout: 30_000 }).catch((err: unknown) => err);
      await sleep(200); // queued and subscribed
      await Promise.all(own.nodes.map((n) => n.kill())); // every node down: nothing is saved
      await sleep(1500);
      await Promise.all(own.nodes.map((n) => n.start()));
      // The lock went with the data; the subscription comes back, tells the waiter that
      // messages may have been missed, and the waiter takes the lock long before the old TTL.
      const token = await waiting;
      if (typeof token !== 'number') throw token;
      expect(token as number).toBeGreaterThan(held);
      expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
      await waiter.release();
    } finally {
      process.off('warning', onWarning);
      await own.stop();
    }
  });
});
