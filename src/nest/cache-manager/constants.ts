/**
 * The tokens and metadata keys of `dogpile-guard/nest/cache-manager`. Their values are
 * `@nestjs/cache-manager`'s, so that code written against that package (a library that
 * injects `CACHE_MANAGER`, a controller decorated with its `@CacheKey()`) meets this one.
 */

/** Injection token of the cache (`@Inject(CACHE_MANAGER) cache: Cache`). The same string as `@nestjs/cache-manager`'s. */
export const CACHE_MANAGER = 'CACHE_MANAGER';

/** Where `@CacheKey()` keeps its key or key function, on a handler. */
export const CACHE_KEY_METADATA = 'cache_module:cache_key';

/** Where `@CacheTTL()` keeps its TTL or TTL function, on a handler or a controller class. */
export const CACHE_TTL_METADATA = 'cache_module:cache_ttl';
