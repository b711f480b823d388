/**
 * A loader states the verdict on its own result through its context: `ctx.setTtl` (stored for
 * that long, seen on the TTL Redis holds), `ctx.setTags` (the entry is dropped by those tags'
 * invalidation), `ctx.skip()` (handed to the callers waiting now, not stored), `ctx.decide()`
 * (any `CacheDecision`, in place of the call's `cacheable`). Bad arguments reject the call with
 * an `InvalidOptionError` naming the method, and nothing is stored. Run on the in-process store
 * and on a real Redis.
 */
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import { freshId } from '../tools/basics.js';

const server = useRedis();

const stores: Array<[string, () => DogpileCache]> = [
  ['memory', () => createCache()],
  ['redis', () => createCache({ redis: server.client(), prefix: freshId('ctx') })],
];

describe.each(stores)('%s: the loader context', (_name, make) => {
  it('setTtl: the entry is stored for the loader\'s ttl, not the call\'s', async () => {
    const cache = make();
    await cache.getOrCompute('k', (ctx) => {
      ctx.setTtl('1s');
      return 'v';
    }, 60_000);
    const stored = await cache.getOrCompute('k', () => 'other', 60_000);
    expect(stored).toBe('v');
    const waitUntilGone = async (): Promise<string> => {
      const deadline = performance.now() + 10_000;
      while (performance.now() < deadline) {
        const r = await cache.get<string>('k');
        if (r === undefined) return 'gone';
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return 'still there';
    };
    expect(await waitUntilGone()).toBe('gone');
    await cache.close();
  });

  it('setTags: invalidating a tag the loader set drops the entry; the call\'s tags stay', async () => {
    const cache = make();
    await cache.getOrCompute('k', (ctx) => {
      ctx.setTags(['mine']);
      return 'v';
    }, { ttl: 60_000, tags: ['call'] });
    expect(await cache.get('k')).toBe('v');
    await cache.invalidateTags(['mine']);
    expect(await cache.get('k')).toBeUndefined();
    await cache.getOrCompute('k', (ctx) => {
      ctx.setTags(['mine']);
      return 'v2';
    }, { ttl: 60_000, tags: ['call'] });
    await cache.invalidateTags(['call']);
    expect(await cache.get('k')).toBeUndefined();
    await cache.close();
  });

  it('skip: the callers of the run get the value, nothing is stored, the next call runs the loader', async () => {
    const cache = make();
    let runs = 0;
    const loader = async (ctx: { skip(): void }) => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 50));
      ctx.skip();
      return `v${runs}`;
    };
    const burst = await Promise.all(Array.from({ length: 10 }, () => cache.getOrCompute('k', loader, 60_000)));
    expect(runs).toBe(1);
    expect(new Set(burst)).toEqual(new Set(['v1']));
    expect(await cache.get('k')).toBeUndefined();
    expect(await cache.getOrCompute('k', loader, 60_000)).toBe('v2');
    await cache.close();
  });

  it('decide wins over the call\'s cacheable; a stored decision carries its ttl and tags', async () => {
    const cache = make();
    const r = await cache.getOrCompute('k', (ctx) => {
      ctx.decide({ decision: 'store', ttl: 60_000, tags: ['d'] });
      return 'v';
    }, { ttl: 60_000, cacheable: () => 'share' });
    expect(r).toBe('v');
    expect(await cache.get('k')).toBe('v');
    await cache.invalidateTags(['d']);
    expect(await cache.get('k')).toBeUndefined();
    const p = await cache.getOrCompute('p', (ctx) => {
      ctx.decide('private');
      return 'mine';
    }, { ttl: 60_000, cacheable: () => 'store' });
    expect(p).toBe('mine');
    expect(await cache.get('p')).toBeUndefined();
    await cache.close();
  });

  it('without a declaration the call\'s cacheable still decides', async () => {
    const cache = make();
    await cache.getOrCompute('k', () => 'v', { ttl: 60_000, cacheable: () => 'share' });
    expect(await cache.get('k')).toBeUndefined();
    await cache.getOrCompute('k', () => 'v', { ttl: 60_000, cacheable: () => 'store' });
    expect(await cache.get('k')).toBe('v');
    await cache.close();
  });

  it('bad arguments reject the call with an InvalidOptionError naming the method, and nothing is stored', async () => {
    const cache = make();
    const cases: Array<[string, (ctx: Parameters<Parameters<DogpileCache['getOrCompute']>[1]>[0]) => void]> = [
      ['ctx.setTtl', (ctx) => ctx.setTtl(0)],
      ['ctx.setTtl', (ctx) => ctx.setTtl('soon' as '1s')],
      ['ctx.setTags', (ctx) => ctx.setTags([''])],
      ['ctx.setTags', (ctx) => ctx.setTags('t' as unknown as string[])],
      ['ctx.decide', (ctx) => ctx.decide('keep' as 'store')],
      ['ctx.decide', (ctx) => ctx.decide({ decision: 'store', ttl: -1 })],
    ];
    for (const [option, misuse] of cases) {
      const key = freshId('bad');
      const call = cache.getOrCompute(key, (ctx) => {
        misuse(ctx);
        return 'v';
      }, 60_000);
      await expect(call).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(call).rejects.toMatchObject({ option });
      expect(await cache.get(key)).toBeUndefined();
    }
    await cache.close();
  });
});
