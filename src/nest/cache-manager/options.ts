import type { ConfigurableModuleAsyncOptions, Provider, Type } from '@nestjs/common';
import type { DogpileCache } from '../../core/cache.js';
import { CACHE_OPTION_NAMES, type CacheOptions as DogpileCacheOptions } from '../../core/options.js';
import { validateNamespaceName } from '../../core/namespace.js';
import { describe, type Duration } from '../../shared/duration.js';
import { InvalidOptionError } from '../../shared/errors.js';
import { checkKnownOptions } from '../../shared/known-options.js';
import { checkTtlMs } from './ttl.js';

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

const OWN = new Set(['ttl', 'refreshThreshold', 'namespace', 'cacheId', 'cache', 'isGlobal']);
const KNOWN: ReadonlySet<string> = new Set([...OWN, ...CACHE_OPTION_NAMES]);

/** Splits the module options into what `createCache()` takes and the defaults; refuses what has no meaning here, by name. */
export function splitCacheManagerOptions(options: CacheModuleOptions | undefined): {
  cache: DogpileCache | undefined;
  cacheOptions: DogpileCacheOptions;
  defaults: CacheManagerDefaults;
} {
  const o = (options ?? {}) as CacheModuleOptions;
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new InvalidOptionError('options', `expected an object, got ${describe(o)}`);
  for (const name of Object.keys(o)) {
    if (name in REFUSED && o[name] !== undefined) throw new InvalidOptionError(name, `not supported by dogpile-guard/nest/cache-manager: ${REFUSED[name]}`);
  }
  const given = Object.fromEntries(Object.entries(o).filter(([name]) => !(name in REFUSED)));
  checkKnownOptions(given, KNOWN);
  const cacheOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(given)) if (!OWN.has(name)) cacheOptions[name] = value;
  const { cache } = o;
  if (cache !== undefined) {
    if (typeof cache !== 'object' || cache === null || typeof (cache as { resolve?: unknown }).resolve !== 'function') {
      throw new InvalidOptionError('cache', 'expected a cache made by createCache()');
    }
    const extra = Object.keys(cacheOptions).filter((k) => cacheOptions[k] !== undefined);
    if (extra.length > 0) throw new InvalidOptionError('cache', `give either an existing cache or options to create one, not both (also given: ${extra.join(', ')})`);
  }
  if (o.cacheId !== undefined && (typeof o.cacheId !== 'string' || o.cacheId === '')) throw new InvalidOptionError('cacheId', `expected a non-empty string, got ${describe(o.cacheId)}`);
  return {
    cache,
    cacheOptions: cacheOptions as DogpileCacheOptions,
    defaults: {
      ttl: o.ttl === undefined ? 0 : checkTtlMs(o.ttl, 'ttl'),
      refreshThreshold: o.refreshThreshold === undefined ? undefined : checkTtlMs(o.refreshThreshold, 'refreshThreshold'),
      namespace: o.namespace === undefined ? undefined : validateNamespaceName(o.namespace, 'namespace'),
      cacheId: o.cacheId,
    },
  };
}
