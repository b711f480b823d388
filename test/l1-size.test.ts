/**
 * `l1: { maxSize }`: the L1 in front of Redis holds at most that many bytes, each copy counted
 * as its stored bytes plus its key, beside `max` (entries); a copy larger than `maxSize` is not
 * held. Bad values are refused with `InvalidOptionError` naming `l1.maxSize`.
 */
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import { freshId, sleep } from '../tools/basics.js';

const server = useRedis();

/** Reads each key until the L1 answers it (or 100 rounds): a key is held once its channel was followed before a read. */
async function hold(cache: DogpileCache, keys: string[]): Promise<void> {
  for (let round = 0; round < 100; round++) {
    for (const key of keys) await cache.get(key);
    if (keys.every((k) => cache.peek(k) !== undefined)) return;
    await sleep(5);
  }
}

describe('l1.maxSize', () => {
  it('refuses anything but a positive integer, naming l1.maxSize', () => {
    for (const maxSize of [0, -1, 1.5, Number.NaN, '1000', null]) {
      expect(() => createCache({ l1: { maxSize: maxSize as number } }), String(maxSize)).toThrow(InvalidOptionError);
      expect(() => createCache({ l1: { maxSize: maxSize as number } })).toThrow(/l1\.maxSize/);
    }
    expect(createCache({ l1: { maxSize: 1_000_000 } }).options.l1).toEqual({ max: 1000, ttl: 1000, maxSize: 1_000_000 });
  });

  it('holds at most maxSize bytes of stored entries; without it, max alone bounds the L1', async () => {
    const prefix = freshId('size');
    const writer = createCache({ redis: server.client(), prefix });
    const value = 'x'.repeat(1000);
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    await writer.setMany(keys.map((key) => ({ key, value })), { ttl: 60_000 });
    // Each entry is about 1 kB as stored: 10 kB hold fewer than 10 of them.
    const bounded = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000, maxSize: 10_000 } });
    const unbounded = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    await hold(unbounded, keys);
    expect(keys.filter((k) => unbounded.peek(k) !== undefined)).toHaveLength(40);
    for (const key of keys) {
      await hold(bounded, [key]);
      expect(bounded.peek(key)).toBe(value);
    }
    const held = keys.filter((k) => bounded.peek(k) !== undefined);
    expect(held.length).toBeGreaterThan(0);
    expect(held.length).toBeLessThan(10);
    // The most recently used ones.
    expect(held).toEqual(keys.slice(40 - held.length));
    for (const c of [writer, bounded, unbounded]) await c.close();
  });

  it('does not hold a copy larger than maxSize (it is read from Redis each time)', async () => {
    const prefix = freshId('big');
    const cache = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000, maxSize: 5_000 } });
    await cache.set('big', 'y'.repeat(10_000), 60_000);
    await cache.set('small', 'z', 60_000);
    await hold(cache, ['small']);
    for (let i = 0; i < 20; i++) expect(await cache.get('big')).toHaveLength(10_000);
    expect(cache.peek('small')).toBe('z');
    expect(cache.peek('big')).toBeUndefined();
    await cache.close();
  });
});
