/**
 * Every call from the HTTP layer into the cache that needs more than its public API: the
 * internal call options live here and nowhere else in `http/`.
 */
import { COMPUTED_FOR, INLINE_REFRESH } from '../core/call-options.js';
import type { DogpileCache, GetOrComputeOptions, Loader, CacheResult } from '../core/cache.js';
import { monotonicNow } from '../shared/clock.js';

/** `cache.set` options of a stored response; `COMPUTED_FOR`: how long its handler ran before the write. */
export type StoreOptions = { ttl: number; tags?: readonly string[]; [COMPUTED_FOR]: number };

/**
 * `cache.set` options for a response written outside the miss protocol, made at the moment of
 * the write: its ttl, its tags, and how long ago its handler started (`startedAt`, on the
 * monotonic clock), so that a response whose handler ran while one of its tags was
 * invalidated counts as older than the invalidation, as a loader's value does.
 */
export function storeOptions(ttl: number, tags: readonly string[] | undefined, startedAt: number): StoreOptions {
  // Stamps and `createdAt` are whole milliseconds, rounded down: one more keeps a handler that
  // started in the invalidation's own millisecond older than it.
  const computed = Math.max(0, Math.ceil(monotonicNow() - startedAt)) + 1;
  return tags === undefined || tags.length === 0 ? { ttl, [COMPUTED_FOR]: computed } : { ttl, tags, [COMPUTED_FOR]: computed };
}

/**
 * `cache.resolve()` for a stored response (or, from Nest, a handler's value). `inline`: a stale response inside its
 * `staleWhileRevalidate` window is refreshed by the caller that wins the lead, which waits for
 * it (its own handler answers its client); without it, the refresh runs detached from every
 * caller and they all get the stale response at once.
 */
export function resolveResponse<T>(cache: DogpileCache, key: string, loader: Loader<T>, options: GetOrComputeOptions<T>, inline: boolean): Promise<CacheResult<T>> {
  const call: GetOrComputeOptions<T> = inline ? ({ ...options, [INLINE_REFRESH]: true } as GetOrComputeOptions<T>) : options;
  return cache.resolve(key, loader, call);
}
