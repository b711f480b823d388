/**
 * node-redis cluster clients (`createCluster`, redis 6 and 5) on a real 3-master Redis
 * Cluster: the cache coalesces a miss across two clients and serves keys of every slot, locks
 * hand over across clients, and `RedisLock.resetAll` scans every master.
 */
import { describe, expect, it } from 'vitest';
import { createCache, RedisLock } from '../src/index.js';
import type { NodeRedisCluster } from '../src/redis/node-redis.js';
import { useRedisCluster } from './support/use-redis.js';
import { nodeRedisModule } from '../tools/test-client.js';
import { freshId, sleep } from '../tools/basics.js';

const cluster = useRedisCluster(3);

async function nodeRedisCluster(version: 5 | 6): Promise<NodeRedisCluster & { destroy(): void }> {
  const client = nodeRedisModule(version).createCluster({ rootNodes: cluster.startupNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
  client.on('error', () => {});
  await client.connect();
  return client;
}

describe.each([6, 5] as const)('node-redis %i createCluster', (version) => {
  it('coalesces a miss across two cluster clients and serves keys of every slot', async () => {
    const clients = [await nodeRedisCluster(version), await nodeRedisCluster(version)];
    const [a, b] = clients.map((redis) => createCache({ redis, prefix: `nrc${version}` }));
    try {
      let runs = 0;
      const loader = async () => {
        runs++;
        await sleep(150);
        return { bytes: Buffer.from([0, 255]), text: 'clustered' };
      };
      const key = freshId('shared');
      const values = await Promise.all([...Array.from({ length: 20 }, () => a!.getOrCompute(key, loader, 10_000)), ...Array.from({ length: 20 }, () => b!.getOrCompute(key, loader, 10_000))]);
      expect(runs).toBe(1);
      for (const v of values) expect([v.text, [...Buffer.from(v.bytes)]]).toEqual(['clustered', [0, 255]]);
      const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
      for (const k of keys) expect(await a!.getOrCompute(k, () => `v-${k}`, 10_000)).toBe(`v-${k}`);
      for (const k of keys) expect(await b!.get(k)).toBe(`v-${k}`);
    } finally {
      await a!.close();
      await b!.close();
      for (const c of clients) c.destroy();
    }
  });

  it('locks hand over across clients, and resetAll frees locks on every master', async () => {
    const clients = [await nodeRedisCluster(version), await nodeRedisCluster(version)];
    try {
      const prefix = `nrc${version}`;
      const first = new RedisLock(clients[0]!, 'job', { prefix });
      const second = new RedisLock(clients[1]!, 'job', { prefix });
      const token = await first.acquire();
      const waiting = second.acquire({ timeout: 5000 });
      await sleep(100);
      await first.release();
      expect(await waiting).toBe(token + 1);
      await second.release();
      const held = Array.from({ length: 12 }, (_, i) => new RedisLock(clients[0]!, `stuck-${i}`, { prefix, autoRenew: false, ttl: 60_000 }));
      for (const l of held) await l.acquire();
      expect(await RedisLock.resetAll(clients[1]!, { prefix })).toBe(12);
      for (const l of held) expect(await l.getOwnerId()).toBeNull();
    } finally {
      for (const c of clients) c.destroy();
    }
  });
});
