import { Inject, Module, type DynamicModule, type OnModuleDestroy, type Provider } from '@nestjs/common';
import { openCacheHandle, type CacheHandle } from '../cache-handle.js';
import { CACHE_MANAGER } from './constants.js';
import { manageCache, type CacheManager } from './managed-cache.js';
import { CacheManagerConfigurableModule, CACHE_MODULE_OPTIONS } from './module-definition.js';
import { splitCacheManagerOptions, type CacheManagerDefaults, type CacheModuleAsyncOptions, type CacheModuleOptions } from './options.js';

/** The injection token of the interceptor's defaults (the module's `ttl`). */
export const CACHE_MANAGER_DEFAULTS = Symbol.for('dogpile-guard:cache-manager-defaults');

const CACHE_HANDLE = Symbol('dogpile-guard:cache-manager-handle');

/**
 * cache-manager 7's `Cache` on this library (the type of what `CACHE_MANAGER` injects), and a
 * class token for it: `constructor(private readonly cache: Cache)` injects the same cache.
 */
// The class is the token and the interface its type, as in `@nestjs/cache-manager`: the class
// has no members of its own for the merge to leave unimplemented.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export abstract class Cache {}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type
export interface Cache extends CacheManager {}

const providers: Provider[] = [
  {
    provide: CACHE_HANDLE,
    useFactory: (options: CacheModuleOptions | undefined): Promise<CacheHandle> => {
      const { cache, cacheOptions } = splitCacheManagerOptions(options);
      return openCacheHandle(cache, cacheOptions, 'CacheModule');
    },
    inject: [CACHE_MODULE_OPTIONS],
  },
  {
    provide: CACHE_MANAGER_DEFAULTS,
    useFactory: (options: CacheModuleOptions | undefined): CacheManagerDefaults => splitCacheManagerOptions(options).defaults,
    inject: [CACHE_MODULE_OPTIONS],
  },
  {
    provide: CACHE_MANAGER,
    useFactory: (handle: CacheHandle, defaults: CacheManagerDefaults): CacheManager => {
      const cache = defaults.namespace === undefined ? handle.cache : handle.cache.namespace(defaults.namespace);
      return manageCache(cache, defaults, async () => handle.close?.());
    },
    inject: [CACHE_HANDLE, CACHE_MANAGER_DEFAULTS],
  },
  { provide: Cache, useExisting: CACHE_MANAGER },
];

/**
 * `@nestjs/cache-manager`'s `CacheModule` on this library: `CACHE_MANAGER` (and the `Cache`
 * class token) inject a cache-manager 7 `Cache` whose `wrap()` and whose `CacheInterceptor`
 * routes run a miss once across every process sharing the Redis.
 *
 * ```ts
 * CacheModule.register({ redis: process.env.REDIS_URL, ttl: 60_000, isGlobal: true })
 * ```
 *
 * On shutdown (`app.close()`, or a signal with shutdown hooks enabled) it closes the cache it
 * created and the Redis connection it made from a URL; a client or a cache passed in stays open.
 */
@Module({ providers, exports: [CACHE_MANAGER, Cache, CACHE_MANAGER_DEFAULTS] })
export class CacheModule implements OnModuleDestroy {
  /** The module with these options (`createCache()`'s, plus `ttl`, `refreshThreshold`, `namespace`, `cacheId`, or `cache`) and `isGlobal`. */
  static register<StoreConfig extends Record<any, any> = Record<string, any>>(options: CacheModuleOptions<StoreConfig> = {} as CacheModuleOptions<StoreConfig>): DynamicModule {
    return { ...CacheManagerConfigurableModule.register(options), module: CacheModule, global: options.isGlobal };
  }

  /** The module with options made by a provider: `useFactory` / `useClass` / `useExisting`, `inject`, `imports`, `extraProviders`; and `isGlobal`. */
  static registerAsync<StoreConfig extends Record<any, any> = Record<string, any>>(options: CacheModuleAsyncOptions<StoreConfig>): DynamicModule {
    const definition = CacheManagerConfigurableModule.registerAsync(options);
    return {
      ...definition,
      module: CacheModule,
      global: options.isGlobal,
      providers: options.extraProviders ? [...(definition.providers ?? []), ...options.extraProviders] : definition.providers,
    };
  }

  /** @internal Made by Nest's injector. */
  constructor(@Inject(CACHE_MANAGER) private readonly manager: CacheManager) {}

  async onModuleDestroy(): Promise<void> {
    await this.manager.disconnect();
  }
}
