/**
 * `dogpile-guard/nest/cache-manager`: a drop-in for `@nestjs/cache-manager` on this library.
 * Change the import; `CacheModule`, `CACHE_MANAGER`, `CacheInterceptor`, `@CacheKey()` and
 * `@CacheTTL()` keep their names and signatures, and a miss runs once across every process
 * sharing the Redis.
 */
export { CacheModule, Cache } from './cache-module.js';
export { CacheInterceptor } from './cache-interceptor.js';
export { CacheKey, CacheTTL, type CacheKeyFactory, type CacheTTLFactory } from './decorators.js';
export { CACHE_MANAGER, CACHE_KEY_METADATA, CACHE_TTL_METADATA } from './constants.js';
export { CACHE_MODULE_OPTIONS } from './module-definition.js';
export type { CacheManagerOptions, CacheOptions, CacheModuleOptions, CacheModuleAsyncOptions, CacheOptionsFactory } from './options.js';
export type { CacheManager, CacheManagerEvents, WrapOptions, WrapOptionsRaw, StoredDataRaw } from './managed-cache.js';
