import type { Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { DogpileCache, type GetOrComputeOptions, type Loader } from './cache.js';
import type { CacheOptions } from './options.js';

let defaultCache: DogpileCache | undefined;

/** Creates a cache. Without `redis` it lives in this process; with it, across processes. */
export function createCache(options?: CacheOptions): DogpileCache {
  return new DogpileCache(options);
}

/** The cache behind the top-level `getOrCompute` / `cacheWithoutDogpiling` (in-process until replaced). */
export function getDefaultCache(): DogpileCache {
  defaultCache ??= new DogpileCache();
  return defaultCache;
}

/** Replaces the default cache (e.g. with one on Redis). The previous one is not closed. */
export function setDefaultCache(cache: DogpileCache): void {
  if (!(cache instanceof DogpileCache)) throw new InvalidOptionError('cache', 'expected a cache made by createCache()');
  defaultCache = cache;
}

/** `getOrCompute` on the default cache. */
export function getOrCompute<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<T> {
  return getDefaultCache().getOrCompute(key, loader, ttlOrOptions);
}

/**
 * Returns the cached value of `key`, or computes it with `loader` exactly once among all
 * concurrent callers and caches it for `ttl`. `options` are those of `getOrCompute`.
 */
export function cacheWithoutDogpiling<T>(
  key: string,
  loader: Loader<T>,
  ttl: Duration,
  options: Omit<GetOrComputeOptions<T>, 'ttl'> = {},
): Promise<T> {
  return getDefaultCache().getOrCompute(key, loader, { ...options, ttl });
}
