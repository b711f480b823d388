/**
 * Every call from the HTTP layer into the cache that needs more than its public API: the
 * internal call options live here and nowhere else in `http/`.
 */
import type { DogpileCache, GetOrComputeOptions, Loader, CacheResult } from '../../core/cache.js';
import { resolveInline, setComputed } from '../../core/internal.js';
import { monotonicNow } from '../../shared/clock.js';

/** A hit of a response seen fresh in Redis, read without `resolve` (see `readIfFresh`). */
export { NOT_FRESH, readIfFresh } from '../../core/internal.js';

/** A stored response's `set`: its ttl and tags, and how long its handler ran before the write (ms). */
export type StoreOptions = { ttl: number; tags?: readonly string[]; computedFor: number };

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
  return tags === undefined || tags.length === 0 ? { ttl, computedFor: computed } : { ttl, tags, computedFor: computed };
}

/** Stores a response computed for `options.computedFor` ms: like a loader's value, not as the application's write. */
export function storeComputed(cache: DogpileCache, key: string, value: unknown, options: StoreOptions): Promise<void> {
  const { computedFor, ...setOptions } = options;
  return setComputed(cache, key, value, setOptions, computedFor);
}

/**
 * `cache.resolve()` for a stored response (or, from Nest, a handler's value). `inline`: a stale response inside its
 * `staleWhileRevalidate` window is refreshed by the caller that wins the lead, which waits for
 * it (its own handler answers its client); without it, the refresh runs detached from every
 * caller and they all get the stale response at once.
 */
export function resolveResponse<T>(cache: DogpileCache, key: string, loader: Loader<T>, options: GetOrComputeOptions<T>, inline: boolean): Promise<CacheResult<T>> {
  return inline ? resolveInline(cache, key, loader, options) : cache.resolve(key, loader, options);
}
