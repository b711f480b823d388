import type { ConfigurableModuleAsyncOptions, Provider, Type } from '@nestjs/common';
import type { DogpileCache } from '../../core/cache.js';
import type { CacheOptions as DogpileCacheOptions } from '../../core/options.js';
import { validateNamespaceName } from '../../core/namespace.js';
import type { Duration } from '../../shared/duration.js';
import { InvalidOptionError } from '../../shared/errors.js';
import { durationOrZero, nonEmptyString, optionsObject, type OptionTable } from '../../shared/option-table.js';
import { cacheCheck } from '../../http/options.js';
import { splitCacheOptions } from '../options.js';

/**
 * Options of `CacheModule.register()`: `@nestjs/cache-manager`'s that have a meaning here
 * (`ttl`, `refreshThreshold`, `namespace`, `cacheId`), beside those of `createCache()`
 * (`redis`, `prefix`, `l1`, `staleWhileRevalidate`, ...), or `cache` (an existing cache).
 */
export interface CacheManagerOptions extends DogpileCacheOptions {
  /** Default TTL of `set()`, `wrap()` and `CacheInterceptor`: ms (or `'5m'`); `0` or none keeps values as long as the cache can (`MAX_DURATION_MS`). */
  ttl?: Duration;
  /**
   * Default of `wrap()`'s `refreshThreshold` (ms): in the last `refreshThreshold` ms of a
   * value's TTL, `wrap()` answers it at once and one call across every process refreshes it.
   */
  refreshThreshold?: number;
  /** Keeps every value in this namespace of the cache (`cache.namespace(name)`): `clear()` drops exactly them. */
  namespace?: string;
  /** What `cacheId()` returns. @default a random string */
  cacheId?: string;
  /** Use this cache instead of creating one. The module never closes a cache it was given. */
  cache?: DogpileCache;
}

/** `CacheManagerOptions` with the options of a store of your own (kept for `@nestjs/cache-manager`'s signature; unknown names are refused). */
export type CacheOptions<StoreConfig extends Record<any, any> = Record<string, any>> = CacheManagerOptions & StoreConfig;

/** What `CacheModule.register()` takes: the options plus `isGlobal`. */
export type CacheModuleOptions<StoreConfig extends Record<any, any> = Record<string, any>> = CacheOptions<StoreConfig> & {
  /** Registers the module globally: its `CACHE_MANAGER` is injectable everywhere. */
  isGlobal?: boolean;
};

/** A provider whose `createCacheOptions()` makes the options (`registerAsync({ useClass })`, `useExisting`). */
export interface CacheOptionsFactory<StoreConfig extends Record<any, any> = Record<string, any>> {
  createCacheOptions(): Promise<CacheOptions<StoreConfig>> | CacheOptions<StoreConfig>;
}

/** What `CacheModule.registerAsync()` takes. */
export interface CacheModuleAsyncOptions<StoreConfig extends Record<any, any> = Record<string, any>>
  extends ConfigurableModuleAsyncOptions<CacheOptions<StoreConfig>, keyof CacheOptionsFactory> {
  useExisting?: Type<CacheOptionsFactory<StoreConfig>>;
  useClass?: Type<CacheOptionsFactory<StoreConfig>>;
  useFactory?: (...args: any[]) => Promise<CacheOptions<StoreConfig>> | CacheOptions<StoreConfig>;
  inject?: any[];
  /** Providers registered in the module's scope (for what `useFactory` / `useClass` inject). */
  extraProviders?: Provider[];
  isGlobal?: boolean;
}

/** The defaults of the injected cache and of `CacheInterceptor`, resolved from the options. */
export interface CacheManagerDefaults {
  /** ms; 0: none given. */
  ttl: number;
  refreshThreshold: number | undefined;
  namespace: string | undefined;
  cacheId: string | undefined;
}

/** `@nestjs/cache-manager` options with no meaning here, and what to use instead. */
const REFUSED: Record<string, string> = {
  stores:
    'Keyv stores are not used: this cache has one store, Redis (`redis`: a client or a URL) shared by every process, or process memory without it; ' +
    'for an in-process layer in front of Redis use `l1`',
  nonBlocking: 'there is one store (Redis, or process memory); for an in-process layer in front of Redis that answers without a round trip, use `l1`',
  refreshAllStores: 'there is one store (Redis, or process memory); a refresh is written to it and announced to every process',
};

/** The options `CacheModule.register()` adds to those of `createCache()`, declared once. */
const OWN_TABLE = {
  ttl: { default: 0, check: durationOrZero, shown: '`0` (the longest)', doc: 'default TTL of `set()`, `wrap()` and `CacheInterceptor` (ms)' },
  refreshThreshold: { check: durationOrZero, shown: 'none', doc: "default of `wrap()`'s `refreshThreshold` (ms)" },
  namespace: { check: (value: unknown, option: string) => validateNamespaceName(value, option), shown: 'none', doc: 'keeps every value in this namespace of the cache' },
  cacheId: { check: nonEmptyString(), shown: 'a random string', doc: 'what `cacheId()` returns' },
  cache: { check: cacheCheck, shown: 'none', doc: 'use this cache instead of creating one' },
} satisfies OptionTable<Pick<CacheManagerOptions, 'ttl' | 'refreshThreshold' | 'namespace' | 'cacheId' | 'cache'>>;

/** Splits the module options into what `createCache()` takes and the defaults; refuses what has no meaning here, by name. */
export function splitCacheManagerOptions(options: CacheModuleOptions | undefined): {
  cache: DogpileCache | undefined;
  cacheOptions: DogpileCacheOptions;
  defaults: CacheManagerDefaults;
} {
  const o = optionsObject(options ?? {});
  for (const name of Object.keys(o)) {
    if (name in REFUSED && o[name] !== undefined) throw new InvalidOptionError(name, `not supported by dogpile-guard/nest/cache-manager: ${REFUSED[name]}`);
  }
  const given = Object.fromEntries(Object.entries(o).filter(([name]) => !(name in REFUSED)));
  const { cacheOptions, own } = splitCacheOptions(given, OWN_TABLE, ['isGlobal']);
  const { cache, ttl, refreshThreshold, namespace, cacheId } = own;
  return { cache, cacheOptions, defaults: { ttl, refreshThreshold, namespace, cacheId } };
}
