import { Inject, Logger, Module, type OnModuleDestroy, type OnModuleInit, type Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { closeClient, createClientFromUrl, type RedisClient } from '../redis/client.js';
import { DogpileCache } from '../core/cache.js';
import { createCache } from '../core/default-cache.js';
import { resolveCacheOptions } from '../core/options.js';
import { DOGPILE_CACHE, DOGPILE_DEFAULTS } from './constants.js';
import { cacheProviderMethods } from './method-caching.js';
import { checkCachedOverCache } from './check-cached.js';
import { DogpileConfigurableModule, DOGPILE_MODULE_OPTIONS } from './module-definition.js';
import { splitModuleOptions, type DogpileDefaults, type DogpileModuleOptions } from './options.js';

/** The module's cache, whether the module created it, and the Redis client it made from a URL. */
interface CacheHandle {
  cache: DogpileCache;
  owned: boolean;
  client: RedisClient | undefined;
}

const CACHE_HANDLE = Symbol('dogpile-guard:cache-handle');

/** How long startup waits for a Redis given as a URL to connect before going on without it. */
export const REDIS_CONNECT_WAIT_MS = 5000;

const logger = new Logger('DogpileModule');

/**
 * The client for a Redis URL, connected: startup waits for it (up to `REDIS_CONNECT_WAIT_MS`),
 * so the first requests are coordinated through Redis rather than answered without it. If
 * Redis is not there, the app starts anyway; requests run their handlers (with in-process
 * coalescing) until it is.
 */
async function connect(url: string): Promise<RedisClient> {
  // The offline queue stays on (see createClientFromUrl): the cache's subscriber connection is
  // a duplicate of this client, and a waiter's SUBSCRIBE sent while that duplicate is still
  // connecting must not fail. While Redis is down the cache skips it (the client is
  // 'reconnecting') and bounds every call by its commandTimeout.
  const client = createClientFromUrl(url);
  let lastError: Error | undefined;
  client.on('error', (error: Error) => {
    lastError = error;
  });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      client.off('ready', ready);
      logger.warn(`Redis at ${redact(url)} is not reachable yet (${lastError?.message ?? 'no answer'}); starting without it, it will be used once it answers`);
      resolve();
    }, REDIS_CONNECT_WAIT_MS);
    const ready = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', ready);
  });
  return client;
}

function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

const providers: Provider[] = [
  {
    provide: CACHE_HANDLE,
    useFactory: async (options: DogpileModuleOptions | undefined): Promise<CacheHandle> => {
      const { cache, cacheOptions } = splitModuleOptions(options);
      if (cache) return { cache, owned: false, client: undefined };
      if (typeof cacheOptions.redis === 'string') {
        // Validate the rest before connecting, so a bad option does not leave a client open.
        resolveCacheOptions({ ...cacheOptions, redis: undefined });
        const client = await connect(cacheOptions.redis);
        return { cache: createCache({ ...cacheOptions, redis: client }), owned: true, client };
      }
      return { cache: createCache(cacheOptions), owned: true, client: undefined };
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
export class DogpileModule extends DogpileConfigurableModule implements OnModuleInit, OnModuleDestroy {
  constructor(
    @Inject(CACHE_HANDLE) private readonly handle: CacheHandle,
    @Inject(DOGPILE_DEFAULTS) private readonly defaults: DogpileDefaults,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(Reflector) private readonly reflector: Reflector,
  ) {
    super();
  }

  onModuleInit(): void {
    checkCachedOverCache(this.discovery, this.scanner, this.reflector, this.handle.cache);
    cacheProviderMethods(this.discovery, this.scanner, this.reflector, this.handle.cache, this.defaults);
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.handle.owned) return;
    await this.handle.cache.close();
    const { client } = this.handle;
    if (client) await closeClient(client);
  }
}
