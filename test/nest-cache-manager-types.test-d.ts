/**
 * Types of `dogpile-guard/nest/cache-manager`: what `CACHE_MANAGER` injects stands in where
 * cache-manager 7's `Cache` (or `@nestjs/cache-manager`'s) is expected, and the module's
 * signatures take what `@nestjs/cache-manager`'s take.
 */
import { describe, expectTypeOf, it } from 'vitest';
import type { Cache as CacheManager7 } from 'cache-manager';
import type * as Theirs from '@nestjs/cache-manager';
import { CacheModule, type Cache, type CacheModuleAsyncOptions } from '../src/nest/cache-manager/index.js';

describe('nest/cache-manager types', () => {
  it('the injected Cache is a cache-manager 7 Cache, and @nestjs/cache-manager’s', () => {
    expectTypeOf<Cache>().toExtend<CacheManager7>();
    expectTypeOf<Cache>().toExtend<Theirs.Cache>();
  });

  it('register() and registerAsync() take the same arguments as @nestjs/cache-manager’s', () => {
    expectTypeOf(CacheModule.register).toBeCallableWith({ ttl: 5000, isGlobal: true });
    expectTypeOf(CacheModule.register).toBeCallableWith();
    expectTypeOf<Parameters<typeof Theirs.CacheModule.registerAsync>[0]['useFactory']>().toExtend<CacheModuleAsyncOptions['useFactory']>();
  });

  it('wrap() answers the value, or { value, expires } with raw', () => {
    const cache = {} as Cache;
    expectTypeOf(cache.wrap('k', () => 1, 1000)).resolves.toEqualTypeOf<number>();
    expectTypeOf(cache.wrap('k', () => 'a', { ttl: (v: string) => v.length, refreshThreshold: 10 })).resolves.toEqualTypeOf<string>();
    expectTypeOf(cache.wrap('k', () => 1, { raw: true })).resolves.toHaveProperty('expires');
  });
});
