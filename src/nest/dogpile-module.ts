import { Inject, Module, type DynamicModule, type OnModuleDestroy, type OnModuleInit, type Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { DogpileCache } from '../core/cache.js';
import { openCacheHandle, type CacheHandle } from './cache-handle.js';
import { DOGPILE_CACHE, DOGPILE_DEFAULTS } from './constants.js';
import { cacheProviderMethods } from './method-caching.js';
import { checkCachedOverCache } from './check-cached.js';
import { DogpileConfigurableModule, DOGPILE_MODULE_OPTIONS, type DogpileModuleAsyncOptions, type DogpileModuleForRootOptions } from './module-definition.js';
import { splitModuleOptions, type DogpileDefaults, type DogpileModuleOptions } from './options.js';

const CACHE_HANDLE = Symbol('dogpile-guard:cache-handle');

const providers: Provider[] = [
  {
    provide: CACHE_HANDLE,
    useFactory: (options: DogpileModuleOptions | undefined): Promise<CacheHandle> => {
      const { cache, cacheOptions } = splitModuleOptions(options);
      return openCacheHandle(cache, cacheOptions, 'DogpileModule');
    },
    inject: [{ token: DOGPILE_MODULE_OPTIONS, optional: true }],
  },
  {
    provide: DOGPILE_CACHE,
    useFactory: (handle: CacheHandle) => handle.cache,
    inject: [CACHE_HANDLE],
  },
  { provide: DogpileCache, useExisting: DOGPILE_CACHE },
  {
    provide: DOGPILE_DEFAULTS,
    useFactory: (options: DogpileModuleOptions | undefined): DogpileDefaults => splitModuleOptions(options).defaults,
    inject: [{ token: DOGPILE_MODULE_OPTIONS, optional: true }],
  },
];

/**
 * Provides a `DogpileCache` to the app: to `@Cached` routes (through `DogpileInterceptor`),
 * to `@Cached` provider methods, and to services (`@InjectCache()`, or by the `DogpileCache`
 * class where constructor types are emitted).
 *
 * ```ts
 * DogpileModule.forRoot({ redis: process.env.REDIS_URL, ttl: '1m', isGlobal: true })
 * DogpileModule.forRootAsync({
 *   isGlobal: true,
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ redis: config.get('REDIS_URL') }),
 * })
 * ```
 *
 * Options are those of `createCache()` plus `ttl` (the default of `@Cached()`), or `cache`
 * (an existing cache). Without `isGlobal`, import it into each module whose controllers use
 * `@Cached`. On shutdown (`app.close()`, with shutdown hooks on signals) it closes the cache
 * it created, and with it the Redis connections that cache made from a URL; a Redis client
 * or a cache you passed in is left open.
 */
@Module({
  imports: [DiscoveryModule],
  providers,
  exports: [DOGPILE_CACHE, DogpileCache, DOGPILE_DEFAULTS],
})
export class DogpileModule implements OnModuleInit, OnModuleDestroy {
  /** The module with these options: those of `createCache()` plus `ttl`, or `cache`; and `isGlobal`. */
  static forRoot(options: DogpileModuleForRootOptions): DynamicModule {
    return { ...DogpileConfigurableModule.forRoot(options), module: DogpileModule };
  }

  /** The module with options made by a provider: `useFactory` / `useClass` / `useExisting`, `inject`, `imports`; and `isGlobal`. */
  static forRootAsync(options: DogpileModuleAsyncOptions): DynamicModule {
    return { ...DogpileConfigurableModule.forRootAsync(options), module: DogpileModule };
  }

  /** @internal Made by Nest's injector. */
  constructor(
    @Inject(CACHE_HANDLE) private readonly handle: CacheHandle,
    @Inject(DOGPILE_DEFAULTS) private readonly defaults: DogpileDefaults,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(Reflector) private readonly reflector: Reflector,
  ) {}

  onModuleInit(): void {
    checkCachedOverCache(this.discovery, this.scanner, this.reflector, this.handle.cache);
    cacheProviderMethods(this.discovery, this.scanner, this.reflector, this.handle.cache, this.defaults);
  }

  async onModuleDestroy(): Promise<void> {
    await this.handle.close?.();
  }
}
