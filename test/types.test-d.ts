import { describe, expectTypeOf, it } from 'vitest';
import {
  createCache,
  getOrCompute,
  cacheWithoutDogpiling,
  RedisLock,
  MemoryLock,
  withLock,
  errors,
  type DogpileCache,
  type CacheResult,
  type LoaderContext,
  type Lock,
  type SetManyEntry,
  type ClearOptions,
} from '../src/index.js';

describe('public types', () => {
  it('getOrCompute infers the loader value type', () => {
    const cache = createCache();
    expectTypeOf(cache).toEqualTypeOf<DogpileCache>();
    expectTypeOf(cache.getOrCompute('k', async () => ({ id: 1 }), '5m')).toEqualTypeOf<Promise<{ id: number }>>();
    expectTypeOf(cache.getOrCompute('k', () => 'sync', 1000)).toEqualTypeOf<Promise<string>>();
    expectTypeOf(getOrCompute('k', () => 1, { ttl: '30s', waitTimeout: 100 })).toEqualTypeOf<Promise<number>>();
    expectTypeOf(cacheWithoutDogpiling('k', () => [1], 30_000)).toEqualTypeOf<Promise<number[]>>();
    expectTypeOf(cache.resolve('k', () => true, 1000)).toEqualTypeOf<Promise<CacheResult<boolean>>>();
  });

  it('the loader receives key and signal', () => {
    const cache = createCache();
    void cache.getOrCompute('k', (ctx) => {
      expectTypeOf(ctx).toEqualTypeOf<LoaderContext>();
      expectTypeOf(ctx.signal).toEqualTypeOf<AbortSignal>();
      return ctx.key;
    }, 1000);
  });

  it('rejects ill-typed durations and options', () => {
    const cache = createCache();
    // @ts-expect-error a duration string must have a unit the library knows
    void cache.getOrCompute('k', () => 1, '5 minutes');
    // @ts-expect-error ttl is required in the options form
    void cache.getOrCompute('k', () => 1, { lockTtl: 100 });
    // @ts-expect-error unknown cache option
    createCache({ lockTTL: 5 });
  });

  it('locks share one interface and errors carry codes', () => {
    expectTypeOf<RedisLock>().toMatchTypeOf<Lock>();
    expectTypeOf<MemoryLock>().toMatchTypeOf<Lock>();
    expectTypeOf(new MemoryLock('n').acquire()).toEqualTypeOf<Promise<number>>();
    expectTypeOf(new MemoryLock('n').tryAcquire()).toEqualTypeOf<Promise<number | false>>();
    expectTypeOf(withLock('n', ({ fencingToken }) => fencingToken * 2)).toEqualTypeOf<Promise<number>>();
    expectTypeOf(new errors.LockTimeoutError('x').code).toEqualTypeOf<'E_LOCK_TIMEOUT'>();
  });
});

describe('namespaces, clear and bulk calls', () => {
  it('a namespace is a cache; bulk calls and clear are typed', () => {
    const cache = createCache({ jitter: 0.1, l1: { max: 100, maxSize: 1_000_000, ttl: '1s' } });
    expectTypeOf(cache.namespace('users')).toEqualTypeOf<DogpileCache>();
    expectTypeOf(cache.namespace('a').namespace('b').getOrCompute('k', () => 1, 1000)).toEqualTypeOf<Promise<number>>();
    expectTypeOf(cache.clear()).toEqualTypeOf<Promise<void>>();
    expectTypeOf(cache.clear({ stale: true })).toEqualTypeOf<Promise<void>>();
    expectTypeOf(cache.getMany<{ id: number }>(['a', 'b'])).toEqualTypeOf<Promise<({ id: number } | undefined)[]>>();
    expectTypeOf(cache.getMany(['a'])).toEqualTypeOf<Promise<unknown[]>>();
    expectTypeOf(cache.setMany([{ key: 'a', value: 1, ttl: '1m' }, { key: 'b', value: 'two', tags: ['t'] }], { ttl: 1000 })).toEqualTypeOf<Promise<void>>();
    expectTypeOf(cache.deleteMany(['a', 'b'])).toEqualTypeOf<Promise<number>>();
    expectTypeOf<SetManyEntry>().toMatchTypeOf<{ key: string; value: unknown }>();
    expectTypeOf<ClearOptions>().toEqualTypeOf<{ stale?: boolean }>();
    // @ts-expect-error a namespace name is a string
    cache.namespace(1);
    // @ts-expect-error clear() takes { stale }
    void cache.clear({ hard: true });
    // @ts-expect-error every entry needs a key
    void cache.setMany([{ value: 1 }]);
    // @ts-expect-error keys are strings
    void cache.getMany([1]);
    // @ts-expect-error jitter is a number
    createCache({ jitter: '10%' });
  });
});
