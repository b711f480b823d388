/**
 * Bulk calls: `getMany(keys)`, `setMany(entries)`, `deleteMany(keys)`, on the in-process store
 * and on a real Redis. On Redis each is one round trip: every command is written to the
 * connection before any reply is read (observed on the client's socket), one command per key
 * not answered from the L1 (INFO commandstats). They keep other processes' L1 copies coherent
 * (a second cache on its own connection stands for another process; the cross-process proofs
 * of the channels themselves are in coherence-processes.test.ts). Bad input is refused with
 * `InvalidOptionError` (or `SerializationError`) before anything is written.
 */
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createCache, InvalidOptionError, SerializationError, type DogpileCache } from '../src/index.js';
import { useRedis, useRedisCluster } from './support/use-redis.js';
import { freshId, sleep } from '../tools/basics.js';

const server = useRedis();

/** What "within one delivery" is checked against: far below the 60 s L1 TTL that would otherwise keep serving a copy. */
const DELIVERY_BOUND_MS = 2_000;

/** Records, in order, each write to the client's socket ('w') and each chunk of replies read from it ('r'). */
function tapSocket(redis: Redis): { log: string[]; stop: () => void } {
  const stream = (redis as unknown as { stream: Socket }).stream;
  const log: string[] = [];
  const write = stream.write;
  stream.write = function (this: Socket, ...args: unknown[]) {
    log.push('w');
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as Socket['write'];
  const onData = () => log.push('r');
  stream.prependListener('data', onData);
  return {
    log,
    stop: () => {
      stream.write = write;
      stream.off('data', onData);
    },
  };
}

/** Successful calls of `command` on the test server since the last CONFIG RESETSTAT. */
async function calls(command: string): Promise<number> {
  const stats = String(await server.command('INFO', 'commandstats'));
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+),.*failed_calls=(\\d+)`).exec(stats);
  return m ? Number(m[1]) - Number(m[2]) : 0;
}

async function oneRoundTrip<T>(redis: Redis, call: () => Promise<T>): Promise<T> {
  const tap = tapSocket(redis);
  try {
    const result = await call();
    const writes = tap.log.filter((e) => e === 'w').length;
    expect(writes).toBeGreaterThan(0);
    // Every write came before the first reply was read: no command waited for another's reply.
    expect(tap.log.lastIndexOf('w')).toBeLessThan(tap.log.indexOf('r'));
    return result;
  } finally {
    tap.stop();
  }
}

const stores: [string, () => DogpileCache][] = [
  ['in process', () => createCache()],
  ['on Redis', () => createCache({ redis: server.client(), prefix: freshId('bulk') })],
];

describe.each(stores)('bulk calls %s', (_name, make) => {
  it('getMany answers in the order of the keys, undefined where there is no value, a repeated key alike', async () => {
    const cache = make();
    await cache.setMany([
      { key: 'a', value: 1, ttl: 60_000 },
      { key: 'b', value: { two: 2 } },
      { key: 'c', value: 'three', tags: ['t'] },
    ], { ttl: 60_000 });
    expect(await cache.getMany(['c', 'missing', 'a', 'b', 'a'])).toEqual(['three', undefined, 1, { two: 2 }, 1]);
    expect(await cache.getMany([])).toEqual([]);
    await cache.invalidateTags(['t']);
    expect(await cache.getMany(['a', 'c'])).toEqual([1, undefined]);
    expect(await cache.getOrCompute('a', () => 99, 60_000)).toBe(1);
    await cache.close();
  });

  it('deleteMany deletes, tells how many keys held a value, and the next reads load again', async () => {
    const cache = make();
    await cache.setMany(['a', 'b', 'c'].map((key) => ({ key, value: key })), { ttl: 60_000 });
    expect(await cache.deleteMany(['a', 'c', 'c', 'nothing'])).toBe(2);
    expect(await cache.getMany(['a', 'b', 'c'])).toEqual([undefined, 'b', undefined]);
    expect(await cache.getOrCompute('a', () => 'again', 60_000)).toBe('again');
    expect(await cache.deleteMany([])).toBe(0);
    await cache.close();
  });

  it('setMany: entries of one key are written in their order; tags of the call and of the entry add up', async () => {
    const cache = make();
    await cache.setMany([
      { key: 'k', value: 1 },
      { key: 'k', value: 2, tags: ['own'] },
    ], { ttl: 60_000, tags: ['all'] });
    expect(await cache.get('k')).toBe(2);
    await cache.invalidateTags(['all']);
    expect(await cache.get('k')).toBeUndefined();
    await cache.setMany([{ key: 'k', value: 3, tags: ['own'] }], { ttl: 60_000, tags: ['all'] });
    await cache.invalidateTags(['own']);
    expect(await cache.get('k')).toBeUndefined();
    await cache.close();
  });

  it('refuses bad input with InvalidOptionError naming it (SerializationError for a value), before anything is written', async () => {
    const cache = make();
    const bad: [unknown, RegExp][] = [
      ['k', /keys/],
      [null, /keys/],
      [['a', ''], /keys/],
      [['a', 1], /keys/],
    ];
    for (const [keys, name] of bad) {
      await expect(cache.getMany(keys as string[])).rejects.toThrow(InvalidOptionError);
      await expect(cache.getMany(keys as string[])).rejects.toThrow(name);
      await expect(cache.deleteMany(keys as string[])).rejects.toThrow(name);
    }
    const entries: [unknown, unknown, RegExp][] = [
      [{ key: 'a', value: 1 }, undefined, /entries/],
      [[{ key: 'a', value: 1 }, null], { ttl: 1000 }, /entries\[1\]/],
      [[{ key: 'a', value: 1 }, { key: '', value: 2 }], { ttl: 1000 }, /entries\[1\]\.key/],
      [[{ key: 'a', value: 1 }, { key: 'b', value: 2 }], undefined, /entries\[0\]\.ttl/],
      [[{ key: 'a', value: 1, ttl: 1000 }, { key: 'b', value: 2, ttl: -5 }], undefined, /entries\[1\]\.ttl/],
      [[{ key: 'a', value: 1, ttl: 1000 }, { key: 'b', value: 2, ttl: 'soon' }], undefined, /entries\[1\]\.ttl/],
      [[{ key: 'a', value: 1, ttl: 1000 }, { key: 'b', value: 2, ttl: 1000, tags: [''] }], undefined, /entries\[1\]\.tags/],
      [[{ key: 'a', value: 1, ttl: 1000 }, { key: 'b', value: 2, ttl: 1000, tags: 'x' }], undefined, /entries\[1\]\.tags/],
      [[{ key: 'a', value: 1 }], { ttl: 0 }, /ttl/],
      [[{ key: 'a', value: 1 }], { ttl: 1000, tags: [7] }, /tags/],
      [[{ key: 'a', value: 1 }], 'soon', /options/],
    ];
    for (const [list, options, name] of entries) {
      const call = cache.setMany(list as never, options as never);
      await expect(call, `${JSON.stringify(list)} ${JSON.stringify(options)}`).rejects.toThrow(InvalidOptionError);
      await expect(cache.setMany(list as never, options as never)).rejects.toThrow(name);
    }
    // A value that cannot be serialised, after a good one: neither is written.
    await expect(cache.setMany([{ key: 'a', value: 1 }, { key: 'f', value: () => 1 }], { ttl: 1000 })).rejects.toThrow(SerializationError);
    expect(await cache.getMany(['a', 'b', 'f'])).toEqual([undefined, undefined, undefined]);
    await cache.close();
  });
});

describe('bulk calls on Redis', () => {
  it('getMany is one round trip: one MGET of the keys not held in the L1', async () => {
    const redis = server.client();
    const cache = createCache({ redis, prefix: freshId('get'), l1: { ttl: 60_000 } });
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    await cache.setMany(keys.map((key, i) => ({ key, value: i })), { ttl: 60_000 });
    // Ten keys held in the L1 (read twice: the second read is followed by the key's channel).
    for (let round = 0; round < 2; round++) for (const key of keys.slice(0, 10)) await cache.get(key);
    for (let i = 0; i < 200 && keys.slice(0, 10).some((k) => cache.peek(k) === undefined); i++) {
      await cache.getMany(keys.slice(0, 10));
      await sleep(5);
    }
    expect(keys.slice(0, 10).map((k) => cache.peek(k))).toEqual(keys.slice(0, 10).map((_, i) => i));
    await server.command('CONFIG', 'RESETSTAT');
    const values = await oneRoundTrip(redis, () => cache.getMany([...keys, 'missing']));
    expect(values).toEqual([...keys.map((_, i) => i), undefined]);
    expect(await calls('mget')).toBe(1);
    expect((await calls('get')) + (await calls('evalsha')) + (await calls('eval'))).toBe(0);
    await cache.close();
  });

  it('getOrComputeMany answers the hits this process saw fresh with one MGET, no script and no loader call; tagged entries and misses go the one-key way', async () => {
    const redis = server.client();
    const cache = createCache({ redis, prefix: freshId('gocm') });
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    await cache.setMany(keys.map((key, i) => ({ key, value: i })), { ttl: 60_000 });
    await cache.set('tagged', 'with tags', { ttl: 60_000, tags: ['t'] });
    // The cache's generation stamp followed: the first read of a cache subscribes to it and reads
    // it in the background (and reads it once more for its own value meanwhile). Once a read
    // costs its value's GET alone, the stamp is held here and no read of it is still to come.
    for (let round = 0; ; round++) {
      await server.command('CONFIG', 'RESETSTAT');
      expect(await cache.get('k0')).toBe(0);
      if ((await calls('get')) === 1) break;
      expect(round).toBeLessThan(100);
      await sleep(10);
    }
    let loads = 0;
    const loader = (missing: string[]) => {
      loads++;
      return missing.map((key) => `loaded ${key}`);
    };
    await server.command('CONFIG', 'RESETSTAT');
    expect(await oneRoundTrip(redis, () => cache.getOrComputeMany(keys, loader, 60_000))).toEqual(keys.map((_, i) => i));
    expect(loads).toBe(0);
    expect(await calls('mget')).toBe(1);
    expect((await calls('get')) + (await calls('evalsha')) + (await calls('eval'))).toBe(0);
    // A tagged entry (its stale invalidation takes the protocol's refresh lead) and an unknown key: one lookup each.
    await server.command('CONFIG', 'RESETSTAT');
    expect(await cache.getOrComputeMany(['k1', 'tagged', 'new'], loader, 60_000)).toEqual([1, 'with tags', 'loaded new']);
    expect(loads).toBe(1);
    expect(await calls('mget')).toBe(1);
    expect((await calls('evalsha')) + (await calls('eval'))).toBeGreaterThanOrEqual(2);
    await cache.close();
  });

  it('setMany and deleteMany are one round trip each: one script per key, all sent before any reply is read', async () => {
    const redis = server.client();
    const cache = createCache({ redis, prefix: freshId('set') });
    await cache.set('warm', 0, 60_000);
    await cache.delete('warm');
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    await server.command('CONFIG', 'RESETSTAT');
    await oneRoundTrip(redis, () => cache.setMany(keys.map((key, i) => ({ key, value: i })), { ttl: 60_000 }));
    expect((await calls('evalsha')) + (await calls('eval'))).toBe(100);
    expect(await cache.getMany(keys.slice(0, 3))).toEqual([0, 1, 2]);
    await server.command('CONFIG', 'RESETSTAT');
    expect(await oneRoundTrip(redis, () => cache.deleteMany(keys))).toBe(100);
    expect((await calls('evalsha')) + (await calls('eval'))).toBe(100);
    expect(await cache.getMany(keys.slice(0, 3))).toEqual([undefined, undefined, undefined]);
    await cache.close();
  });

  it('setMany and deleteMany keep another process\'s L1 coherent (its copies follow within one delivery)', async () => {
    const prefix = freshId('coherent');
    const writer = createCache({ redis: server.client(), prefix });
    const reader = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    const keys = ['a', 'b', 'c', 'd'];
    await writer.setMany(keys.map((key) => ({ key, value: 'v1' })), { ttl: 600_000 });
    for (let i = 0; i < 200 && keys.some((k) => reader.peek(k) !== 'v1'); i++) {
      await reader.getMany(keys);
      await sleep(5);
    }
    expect(keys.map((k) => reader.peek(k))).toEqual(['v1', 'v1', 'v1', 'v1']);
    await writer.setMany(keys.map((key) => ({ key, value: 'v2' })), { ttl: 600_000 });
    const end = performance.now() + DELIVERY_BOUND_MS;
    while (keys.some((k) => reader.peek(k) !== 'v2') && performance.now() < end) await sleep(2);
    expect(keys.map((k) => reader.peek(k))).toEqual(['v2', 'v2', 'v2', 'v2']);
    await writer.deleteMany(['a', 'c']);
    const end2 = performance.now() + DELIVERY_BOUND_MS;
    while ((reader.peek('a') !== undefined || reader.peek('c') !== undefined) && performance.now() < end2) await sleep(2);
    expect(keys.map((k) => reader.peek(k))).toEqual([undefined, 'v2', undefined, 'v2']);
    expect(await reader.getMany(keys)).toEqual([undefined, 'v2', undefined, 'v2']);
    await writer.close();
    await reader.close();
  });

  it('nothing is written for bad input', async () => {
    const redis = server.client();
    const cache = createCache({ redis, prefix: freshId('bad') });
    await cache.set('warm', 0, 60_000);
    const before = await redis.dbsize();
    await expect(cache.setMany([{ key: 'a', value: 1 }, { key: 'b', value: 2, ttl: Number.NaN }], { ttl: 1000 })).rejects.toThrow(InvalidOptionError);
    await expect(cache.setMany([{ key: 'a', value: 1 }, { key: 'f', value: Symbol('no') }], { ttl: 1000 })).rejects.toThrow(SerializationError);
    await expect(cache.deleteMany(['warm', ''])).rejects.toThrow(InvalidOptionError);
    expect(await redis.dbsize()).toBe(before);
    expect(await cache.get('warm')).toBe(0);
    await cache.close();
  });
});

describe('on a 3-master Redis Cluster', () => {
  const cluster = useRedisCluster(3);

  it('bulk calls, namespaces and clear() work across slots (keys of one call on every shard)', async () => {
    const prefix = freshId('cluster');
    const a = createCache({ redis: cluster.client(), prefix });
    const b = createCache({ redis: cluster.client(), prefix, l1: { ttl: 60_000 } });
    // 12 keys: more than 10 first reads through an L1 at once on one node trip a listener
    // warning in the sharded subscriber (src/redis/sharded-connection.ts), a matter of its own.
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    const last = keys[keys.length - 1]!;
    await a.setMany(keys.map((key, i) => ({ key, value: i })), { ttl: 60_000 });
    expect(await b.getMany(keys)).toEqual(keys.map((_, i) => i));
    const ns = a.namespace('n');
    await ns.setMany(keys.map((key) => ({ key, value: 'in n' })), { ttl: 60_000 });
    expect(await b.namespace('n').getMany(['k0', last])).toEqual(['in n', 'in n']);
    await a.namespace('n').clear();
    // b hears of the clear within one delivery (its stamps follow their channels).
    const end = performance.now() + DELIVERY_BOUND_MS;
    while ((await b.namespace('n').getMany(['k0', last])).some((v) => v !== undefined) && performance.now() < end) await sleep(5);
    expect(await b.namespace('n').getMany(['k0', last])).toEqual([undefined, undefined]);
    expect(await b.getMany(['k0', last])).toEqual([0, keys.length - 1]);
    expect(await a.deleteMany(keys.slice(0, 4))).toBe(4);
    await a.clear();
    const end2 = performance.now() + DELIVERY_BOUND_MS;
    while ((await b.getMany(['k0', 'k5', last])).some((v) => v !== undefined) && performance.now() < end2) await sleep(5);
    expect(await b.getMany(['k0', 'k5', last])).toEqual([undefined, undefined, undefined]);
    await a.close();
    await b.close();
  }, 60_000);
});
