import { Logger } from '@nestjs/common';
import type { DogpileCache } from '../core/cache.js';
import { openCache } from '../core/open-cache.js';
import type { CacheOptions } from '../core/options.js';

/** A module's cache, and how to close it when the module made it (with the Redis connection it made from a URL). */
export interface CacheHandle {
  cache: DogpileCache;
  close: (() => Promise<void>) | undefined;
}

/** How long startup waits for a Redis given as a URL to connect before going on without it. */
const REDIS_CONNECT_WAIT_MS = 5000;

function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/**
 * The cache of a Nest module: the one it was given (never closed by the module), or one made
 * from `cacheOptions`. With a URL, startup waits (up to REDIS_CONNECT_WAIT_MS) for Redis, so the
 * first requests are coordinated through it; if it is not there, the app starts anyway and
 * requests run their handlers (with in-process coalescing) until it is.
 */
export async function openCacheHandle(given: DogpileCache | undefined, cacheOptions: CacheOptions, loggerName: string): Promise<CacheHandle> {
  if (given) return { cache: given, close: undefined };
  const redis = cacheOptions.redis;
  const opened = await openCache(cacheOptions, REDIS_CONNECT_WAIT_MS, (reason) => {
    new Logger(loggerName).warn(`Redis at ${redact(typeof redis === 'string' ? redis : '')} is not reachable yet (${reason}); starting without it, it will be used once it answers`);
  });
  return { cache: opened.cache, close: opened.close };
}
