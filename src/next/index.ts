import { createCache } from '../core/default-cache.js';
import type { CacheOptions } from '../core/options.js';
import { cacheHandlerClass, type NextCacheHandlerClass } from './cache-handler.js';
import { useCacheHandler, type NextUseCacheHandler } from './use-cache-handler.js';

export type { NextCacheControl, NextCacheHandler, NextCacheHandlerClass, NextCacheHandlerValue } from './cache-handler.js';
export type { NextUseCacheEntry, NextUseCacheHandler } from './use-cache-handler.js';

/** Options of `createCacheHandler()` and `createUseCacheHandler()`: `createCache`'s (`redis` as a URL or a client, `prefix`, `l1`, `compression`, `serializer`, ...). */
export type NextHandlerOptions = CacheOptions;

/**
 * The class for Next's `cacheHandler` option (ISR pages, route handlers, the `fetch` and
 * `unstable_cache` data cache), over one cache made here once, for every instance Next makes:
 *
 * ```js
 * // cache-handler.mjs
 * export default createCacheHandler({ redis: process.env.REDIS_URL });
 * ```
 *
 * A missing entry is rendered by one process of the fleet (its `get` answers "not found"); every
 * other process's `get` waits for that render's `set` (bounded by `waitTimeout`). A stale entry is
 * due for regeneration only in the process that wins its refresh; the others keep serving it.
 * With Redis unreachable, it answers as an empty cache within `commandTimeout`.
 * @throws InvalidOptionError for an unknown or bad option, naming it.
 */
export function createCacheHandler(options: NextHandlerOptions = {}): NextCacheHandlerClass {
  return cacheHandlerClass(createCache(options));
}

/**
 * The object for Next's `cacheHandlers` option (`default` and `remote`: `'use cache'` and
 * `'use cache: remote'`), over one cache made here once:
 *
 * ```js
 * // use-cache-handler.mjs
 * export default createUseCacheHandler({ redis: process.env.REDIS_URL });
 * ```
 *
 * Entries are coordinated as `createCacheHandler`'s: one run of a cached function per key and
 * revalidation period fleet-wide. Streams are read once and stored; each `get` returns a new one.
 * @throws InvalidOptionError for an unknown or bad option, naming it.
 */
export function createUseCacheHandler(options: NextHandlerOptions = {}): NextUseCacheHandler {
  return useCacheHandler(createCache(options));
}
