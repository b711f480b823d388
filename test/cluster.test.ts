/**
 * The cache and the lock on a real 3-master Redis Cluster: every script touches keys of one
 * hash slot, announcements cross nodes, and resetAll scans every master.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, lockKeys, RedisLock } from '../src/index.js';
import { keySlot } from '../src/redis/pubsub-mode.js';
import { startRedisCluster } from '../tools/redis-server.js';
import { useRedisCluster } from './support/use-redis.js';
import { freshId, sleep } from '../tools/basics.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import { fetchReply } from '../tools/http-client.js';

const cluster = useRedisCluster(3);
afterEach(killAllChildren);


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

  it('getMany and getOrComputeMany read keys of every slot together; a key of the wrong type is that key\'s miss (corrupt), not the batch\'s failure', async () => {
    const client = cluster.client();
    const prefix = freshId('many');
    const cache = createCache({ redis: client, prefix });
    const keys = Array.from({ length: 40 }, (_, i) => `m${i}`);
    await cache.setMany(keys.map((key, i) => ({ key, value: i })), { ttl: 60_000 });
    expect(await cache.getMany([...keys, 'absent'])).toEqual([...keys.map((_, i) => i), undefined]);
    // One key's value replaced by a list: its GET fails (WRONGTYPE) on its own shard.
    await client.del(`${prefix}:v:{m7}`);
    await client.lpush(`${prefix}:v:{m7}`, 'not an entry');
    const corrupt: string[] = [];
    cache.on('corrupt', ({ key }) => corrupt.push(key));
    const values = await cache.getMany(keys);
    expect(values).toEqual(keys.map((_, i) => (i === 7 ? undefined : i)));
    expect(corrupt).toEqual(['m7']);
    let loaded: string[] = [];
    const many = await cache.getOrComputeMany(keys, (missing) => {
      loaded = missing;
      return missing.map(() => 'loaded');
    }, 60_000);
    // The other keys are hits; m7 goes the one-key way, is led and loaded (and stored over the list).
    expect(many).toEqual(keys.map((_, i) => (i === 7 ? 'loaded' : i)));
    expect(loaded).toEqual(['m7']);
    await cache.close();
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

  it('wake-ups use sharded pub/sub on the master of the lock\'s slot, not PUBLISH to every node', async () => {
    const holder = new RedisLock(cluster.client(), 'sharded', { ttl: 60_000, autoRenew: false });
    const waiter = new RedisLock(cluster.client(), 'sharded', { ttl: 60_000, autoRenew: false });
    await holder.acquire();
    const waiting = waiter.acquire({ timeout: 20_000 });
    const channel = lockKeys('dogpile', 'sharded').channel;
    const owner = await cluster.masterOf(keySlot(channel));
    await until(async () => ((await owner.command('PUBSUB', 'SHARDCHANNELS')) as string[]).includes(channel));
    for (const node of cluster.nodes) expect(await node.command('PUBSUB', 'CHANNELS')).toEqual([]);
    await holder.release();
    // The holder's TTL is a minute: only the wake-up can hand the lock over within the wait.
    expect(await waiting).toBeGreaterThan(0);
    await waiter.release();
  });

  it('the cache waits on sharded channels too: a stampede across two clients is served by one loader', async () => {
    const a = createCache({ redis: cluster.client(), l1: false });
    const b = createCache({ redis: cluster.client(), l1: false });
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const loader = async () => {
      runs++;
      await gate;
      return 'sharded';
    };
    const calls = [a.getOrCompute('stamp', loader, 10_000), ...Array.from({ length: 5 }, () => b.getOrCompute('stamp', loader, 10_000))];
    const channels = async () => (await Promise.all(cluster.nodes.map((n) => n.command('PUBSUB', 'SHARDCHANNELS') as Promise<string[]>))).flat();
    await until(async () => (await channels()).some((c) => c.endsWith(':c:{stamp}')));
    for (const node of cluster.nodes) expect(await node.command('PUBSUB', 'CHANNELS')).toEqual([]);
    release();
    expect(await Promise.all(calls)).toEqual(Array(6).fill('sharded'));
    expect(runs).toBe(1);
    await a.close();
    await b.close();
  });

  it('on servers without sharded pub/sub (SPUBLISH unknown) wake-ups fall back to PUBLISH', async () => {
    // Redis 6.2 is not installable here: a Redis 7 with the sharded commands renamed away
    // answers COMMAND INFO and SPUBLISH exactly as a server that never had them.
    const own = await startRedisCluster(3, { args: ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', ''] });
    try {
      const holder = new RedisLock(own.client(), 'old-server', { ttl: 60_000, autoRenew: false });
      const waiter = new RedisLock(own.client(), 'old-server', { ttl: 60_000, autoRenew: false });
      await holder.acquire();
      const waiting = waiter.acquire({ timeout: 20_000 });
      const channel = lockKeys('dogpile', 'old-server').channel;
      await until(async () => (await Promise.all(own.nodes.map((n) => n.command('PUBSUB', 'CHANNELS') as Promise<string[]>))).flat().includes(channel));
      await holder.release();
      expect(await waiting).toBeGreaterThan(0);
      await waiter.release();
      const cache = createCache({ redis: own.client(), l1: false });
      let runs = 0;
      const loader = async () => {
        runs++;
        await sleep(200);
        return 'plain';
      };
      expect(await Promise.all(Array.from({ length: 6 }, () => cache.getOrCompute('k', loader, 10_000)))).toEqual(Array(6).fill('plain'));
      expect(runs).toBe(1);
      await cache.close();
    } finally {
      await own.stop();
    }
  });

  it('across processes: 4 cache processes × 25 concurrent calls on a cold key run the loader once', async () => {
    const key = `procs-${freshId()}`;
    const fleet = await Fleet.start('get-or-compute', 4, { url: '', cluster: cluster.startupNodes, key, loaderMs: 200, cache: { lockTtl: 5000, waitTimeout: 30_000 } });
    const results = (await fleet.run<{ value?: { pid: number; run: number } }>({ mode: 'burst', calls: 25 }, { timeoutMs: 60_000 })).flat();
    expect(results).toHaveLength(100);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(new Set(results.map((r) => `${r.value?.pid}:${r.value?.run}`)).size).toBe(1);
    const counter = cluster.client();
    expect(await counter.get(`${key}:runs`)).toBe('1');
    expect(await fleet.close(20_000)).toBe(true);
  });

  it('lock across processes: 4 processes take one lock 25 times each, never two holders at once', async () => {
    const name = `procs-${freshId()}`;
    const fleet = await Fleet.start('lock', 4, { url: '', cluster: cluster.startupNodes, name });
    const runs = await fleet.run<{ n?: number }>({ mode: 'lanes', lanes: 1, calls: 25 }, { timeoutMs: 90_000 });
    const results = runs.map((records) => ({
      acquired: records.filter((r) => r.ok).length,
      badIncr: records.filter((r) => r.ok && r.n !== 1).map((r) => r.n!),
      errors: records.filter((r) => !r.ok).map((r) => `${r.name}: ${r.message}`),
    }));
    expect(results.flatMap((r) => r.errors)).toEqual([]);
    expect(results.flatMap((r) => r.badIncr)).toEqual([]);
    expect(results.map((r) => r.acquired)).toEqual([25, 25, 25, 25]);
    expect(await fleet.close(20_000)).toBe(true);
  });

  it('HTTP across processes: an Express and a Fastify process, 100 concurrent requests for a cold route run the handler once', async () => {
    const nodes = cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',');
    const servers = await Promise.all(
      (['express', 'fastify'] as const).map(async (framework) => {
        const worker = NodeChild.tsx('test/fixtures/http-server.ts', ['--framework', framework, '--cluster', nodes, '--prefix', 'http']);
        const line = await worker.waitFor((l) => l.includes('"listening"'));
        return { worker, port: (JSON.parse(line) as { port: number }).port };
      }),
    );
    const id = freshId();
    const replies = await Promise.all(
      Array.from({ length: 100 }, (_, i) => fetchReply(servers[i % 2]!.port, `/slow?id=${id}&ms=200`, { headers: { host: 'app.test' } })),
    );
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.text).toBe(replies[0]!.text);
    }
    expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
    expect(await cluster.client().get(`runs:slow:${id}`)).toBe('1');
    for (const s of servers) {
      s.worker.write('{"cmd":"exit"}\n');
      await s.worker.exited;
    }
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

/** Polls `check` every 20 ms until it holds (bounded: 10 s on the monotonic clock). */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not met within 10 s');
    await sleep(20);
  }
}
