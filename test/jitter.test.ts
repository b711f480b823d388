/**
 * `jitter`: each stored entry's TTL is spread by up to ±jitter of it, so keys written together
 * do not expire together; checked on the TTLs Redis holds (PTTL) for `set`, `setMany` and
 * `getOrCompute`. Bad values are refused with `InvalidOptionError` naming `jitter`.
 */
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError } from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import { freshId } from '../tools/basics.js';

const server = useRedis();

const TTL = 100_000;
/** PTTL is read a moment after the write: far more than that moment, far less than the spread checked. */
const SLACK_MS = 5_000;

async function pttls(prefix: string, keys: string[]): Promise<number[]> {
  const redis = server.client();
  return Promise.all(keys.map((key) => redis.pttl(`${prefix}:v:{${key}}`)));
}

describe('jitter', () => {
  it('refuses anything but a number with 0 <= jitter < 1, naming jitter', () => {
    for (const jitter of [-0.1, 1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '0.1', null, true]) {
      expect(() => createCache({ jitter: jitter as number }), String(jitter)).toThrow(InvalidOptionError);
      expect(() => createCache({ jitter: jitter as number })).toThrow(/jitter/);
    }
    expect(createCache({ jitter: 0 }).options.jitter).toBe(0);
    expect(createCache({ jitter: 0.99 }).options.jitter).toBe(0.99);
    expect(createCache().options.jitter).toBe(0);
  });

  it('spreads the TTLs of entries written together by up to ±jitter (set, setMany, getOrCompute)', async () => {
    const prefix = freshId('jitter');
    const cache = createCache({ redis: server.client(), prefix, jitter: 0.2 });
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
    await cache.setMany(keys.slice(0, 100).map((key) => ({ key, value: key })), { ttl: TTL });
    await Promise.all(keys.slice(100, 200).map((key) => cache.set(key, key, TTL)));
    await Promise.all(keys.slice(200).map((key) => cache.getOrCompute(key, () => key, TTL)));
    for (const part of [keys.slice(0, 100), keys.slice(100, 200), keys.slice(200)]) {
      const ttls = await pttls(prefix, part);
      for (const ttl of ttls) {
        expect(ttl).toBeGreaterThan(TTL * 0.8 - SLACK_MS);
        expect(ttl).toBeLessThanOrEqual(TTL * 1.2);
      }
      // 100 draws spread over ±20%: they cover well over half of the range (a spread of 20 s out
      // of 40 s fails with a probability far below 1e-20).
      expect(Math.max(...ttls) - Math.min(...ttls)).toBeGreaterThan(TTL * 0.2);
      expect(ttls.some((t) => t > TTL)).toBe(true);
    }
    // The entries themselves say the same TTL: each key reads as fresh.
    expect(await cache.getMany(keys.slice(0, 3))).toEqual(keys.slice(0, 3));
    await cache.close();
  });

  it('without jitter every entry keeps its TTL', async () => {
    const prefix = freshId('exact');
    const cache = createCache({ redis: server.client(), prefix });
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    await cache.setMany(keys.map((key) => ({ key, value: key })), { ttl: TTL });
    for (const ttl of await pttls(prefix, keys)) {
      expect(ttl).toBeLessThanOrEqual(TTL);
      expect(ttl).toBeGreaterThan(TTL - SLACK_MS);
    }
    await cache.close();
  });

  it('a tagged entry is not spread past tagStampTtl', async () => {
    const prefix = freshId('tagged');
    const cache = createCache({ redis: server.client(), prefix, jitter: 0.5, tagStampTtl: TTL });
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    await cache.setMany(keys.map((key) => ({ key, value: key })), { ttl: TTL, tags: ['t'] });
    const ttls = await pttls(prefix, keys);
    for (const ttl of ttls) expect(ttl).toBeLessThanOrEqual(TTL);
    expect(Math.min(...ttls)).toBeLessThan(TTL * 0.9);
    await cache.close();
  });
});
