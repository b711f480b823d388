/**
 * Bulk writes in bounded chunks, and `autoRecovery` replaying a queued bulk write chunk by
 * chunk: `deleteMany` of 60 000 keys on a healthy Redis deletes them all without a storm of
 * command timeouts, and the cache goes on using Redis right after; a big `deleteMany` queued
 * while Redis is frozen is replayed once it answers, each chunk with its own deadline, the
 * chunks already done not sent again, until every key is gone; a chunk slower than
 * `commandTimeout` on a Redis that answers single commands is replayed in smaller chunks
 * (what counts as unreachable is what counts for any command: one that gets no answer in time).
 */
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

/** Writes `n` values straight into Redis under the cache's key layout; returns their keys. */
async function fill(raw: Redis, prefix: string, n: number): Promise<string[]> {
  const keys = Array.from({ length: n }, (_, i) => `k${i}`);
  for (let i = 0; i < n; i += 5000) {
    const pipeline = raw.pipeline();
    for (const key of keys.slice(i, i + 5000)) pipeline.set(`${prefix}:v:{${key}}`, 'x', 'PX', 600_000);
    await pipeline.exec();
  }
  return keys;
}

/** How many of the keys `fill` wrote Redis still holds. */
async function remaining(raw: Redis, prefix: string): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, found] = await raw.scan(cursor, 'MATCH', `${prefix}:v:{k*`, 'COUNT', 10_000);
    cursor = next;
    n += found.length;
  } while (cursor !== '0');
  return n;
}

/** Script calls Redis ran since the last CONFIG RESETSTAT (every delete and set is one). */
async function scriptCalls(raw: Redis): Promise<number> {
  const info = await raw.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

describe('bulk writes in chunks, replayed chunk by chunk (autoRecovery)', () => {
  const caches: DogpileCache[] = [];
  afterEach(async () => {
    server.thaw();
    await Promise.all(caches.splice(0).map((c) => c.close()));
  });

  function cache(options: Record<string, unknown> = {}) {
    const prefix = freshId('chunks');
    const c = createCache({ prefix, redis: server.client({ maxRetriesPerRequest: null }), autoRecovery: true, ...options });
    caches.push(c);
    const errors: string[] = [];
    c.on('backendError', ({ error }) => errors.push(error.message));
    return { c, prefix, errors };
  }

  it('deleteMany of 60 000 keys on a healthy Redis deletes them all; a set and a getOrCompute right after reach Redis', async () => {
    const raw = server.client();
    const { c, prefix, errors } = cache();
    const keys = await fill(raw, prefix, 60_000);
    expect(await c.deleteMany(keys)).toBe(60_000);
    expect(await remaining(raw, prefix)).toBe(0);
    // The cache is not left waiting on a replay: the set lands in Redis now.
    await c.set('after', 'v', 60_000);
    expect(await raw.exists(`${prefix}:v:{after}`)).toBe(1);
    let runs = 0;
    expect(await c.getOrCompute('computed', () => ++runs, 60_000)).toBe(1);
    expect(await raw.exists(`${prefix}:v:{computed}`)).toBe(1);
    // A second cache reads it from Redis: it was stored there, not only in this process.
    const other = createCache({ prefix, redis: server.client() });
    caches.push(other);
    expect(await other.getOrCompute('computed', () => -1, 60_000)).toBe(1);
    // Each chunk is one deadline: on a healthy Redis no command times out.
    expect(errors).toEqual([]);
  });

  it('deleteMany of 60 000 keys without autoRecovery on a healthy Redis resolves with the count and reports no backendError', async () => {
    const raw = server.client();
    const { c, prefix, errors } = cache({ autoRecovery: false });
    const keys = await fill(raw, prefix, 60_000);
    expect(await c.deleteMany(keys)).toBe(60_000);
    expect(await remaining(raw, prefix)).toBe(0);
    expect(errors).toEqual([]);
  });

  it('setMany of 60 000 entries on a healthy Redis stores them all and reports no backendError', async () => {
    const raw = server.client();
    const { c, prefix, errors } = cache();
    const entries = Array.from({ length: 60_000 }, (_, i) => ({ key: `k${i}`, value: i }));
    await c.setMany(entries, { ttl: 60_000 });
    expect(await remaining(raw, prefix)).toBe(60_000);
    const other = createCache({ prefix, redis: server.client() });
    caches.push(other);
    expect(await other.getMany(['k0', 'k29999', 'k59999'])).toEqual([0, 29_999, 59_999]);
    expect(errors).toEqual([]);
  });

  it('a big deleteMany cut short by Redis freezing is replayed from where it stopped once Redis answers, until every key is deleted', async () => {
    const raw = server.client();
    const watcher = server.client();
    const { c, prefix, errors } = cache({ commandTimeout: 200, backendCooldown: 100 });
    const keys = await fill(raw, prefix, 60_000);
    await c.set('warm', 1, 60_000);
    await raw.config('RESETSTAT');
    // Redis freezes once a third of the keys are deleted (their deletes are announced).
    await watcher.subscribe(`${prefix}:c:{k20000}`);
    watcher.once('message', () => server.freeze());
    expect(await c.deleteMany(keys)).toBe(0); // queued: how many held a value is not known
    // Meanwhile writes wait for the replay and say so.
    await expect(c.set('during', 1, 60_000)).rejects.toThrow(/autoRecovery/);
    await sleep(500);
    server.thaw();
    // The queue drains: a set succeeds again (it replays what is queued first, in order).
    await waitUntil('the queue to drain', async () => {
      try {
        await c.set('after', 'v', 60_000);
        return true;
      } catch {
        return false;
      }
    }, 30_000, 50);
    expect(await remaining(raw, prefix)).toBe(0);
    expect(await raw.exists(`${prefix}:v:{after}`)).toBe(1);
    // The chunks done before the freeze were not sent again: about 60 000 deletes ran in all
    // (plus the chunk cut short and small retries while frozen), not 60 000 more.
    const calls = await scriptCalls(raw);
    expect(calls).toBeGreaterThanOrEqual(60_000);
    expect(calls).toBeLessThan(70_000);
    expect(errors.length).toBeGreaterThan(0);
    watcher.disconnect();
  });

  it('a chunk slower than commandTimeout, on a Redis that answers single commands, is replayed in smaller chunks until it lands', async () => {
    const raw = server.client();
    const { c, prefix } = cache({ commandTimeout: 200, backendCooldown: 50 });
    const keys = await fill(raw, prefix, 2000);
    await c.set('warm', 1, 60_000);
    // Every PUBLISH is matched against every pattern subscribed: 2000 of them make each delete
    // (which announces itself) cost Redis about a millisecond, so a whole chunk outlasts
    // commandTimeout while one delete is answered well within it.
    const slow = server.client();
    const patterns = Array.from({ length: 2000 }, (_, i) => `${prefix}:c:{k*nomatch${i}`);
    await slow.psubscribe(...patterns);
    await c.deleteMany(keys);
    await waitUntil('every key deleted', async () => (await remaining(raw, prefix)) === 0, 45_000, 100);
    await c.set('after', 'v', 60_000);
    expect(await raw.exists(`${prefix}:v:{after}`)).toBe(1);
    slow.disconnect();
  });
});
