import type { Duration } from '../shared/duration.js';
import type { CacheResult, GetOrComputeOptions, Loader, SetOptions } from './types.js';

/*
 * Entry points of a cache for the library's own layers (the HTTP pipeline, Nest), not part of
 * the public API: what a request's handler needs beyond `resolve` and `set`.
 */

/** What a cache hands this module when it is made: its internal entry points. */
interface CacheInternals {
  resolve<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>, inline: boolean): Promise<CacheResult<T>>;
  set<T>(key: string, value: T, ttlOrOptions: Duration | SetOptions, computedForMs: number, revalidate?: number): Promise<void>;
  servedUntil(key: string): Promise<number | undefined>;
  readIfFresh(key: string): Promise<unknown> | undefined;
  tagStamps(tags: readonly string[]): Promise<{ hard: number; stale: number }[]>;
}

/** The key under which a cache keeps its internal entry points (a property the public type does not declare). */
const INTERNALS = Symbol('dogpile-guard.internals');

/** Called by a cache's constructor: its internal entry points, kept on the cache itself. */
export function registerInternals(cache: object, entry: CacheInternals): void {
  Object.defineProperty(cache, INTERNALS, { value: entry, enumerable: false });
}

function of(cache: object): CacheInternals {
  const found = (cache as { [INTERNALS]?: CacheInternals })[INTERNALS];
  if (found === undefined) throw new TypeError('not a cache made by createCache()');
  return found;
}

/**
 * `cache.resolve`, where a caller that wins the lead of a stale value inside
 * `staleWhileRevalidate` runs the refresh itself and waits for it (its request's handler
 * answers it) instead of starting it in the background; every other caller still gets the
 * stale value at once.
 */
export function resolveInline<T>(cache: object, key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
  return of(cache).resolve(key, loader, ttlOrOptions, true);
}

/**
 * `cache.set` of a value computed for `computedForMs` (ms, on the monotonic clock) before this
 * write: stored like a loader's value, beside the runs of the key, not as the application's
 * write. A tagged entry's computation counts as started that long before its `createdAt`, so
 * one whose tag was invalidated while it was being computed is older than the invalidation.
 * With `revalidate` (ms), the value has that staleWhileRevalidate window of its own in place of
 * the cache's windows (stored like a loader's value that decided `{ ttl, staleWhileRevalidate }`).
 */
export function setComputed<T>(cache: object, key: string, value: T, ttlOrOptions: Duration | SetOptions, computedForMs: number, revalidate?: number): Promise<void> {
  const computed = Number.isFinite(computedForMs) && computedForMs > 0 ? computedForMs : 0;
  return of(cache).set(key, value, ttlOrOptions, computed, revalidate);
}

/** What `readIfFresh` resolves when the value read is not a hit as it is: the call goes the full way. */
export const NOT_FRESH: unique symbol = Symbol('dogpile-guard.notFresh');

/**
 * The value of `key` read as `getOrCompute` reads a key this process saw fresh in Redis (one
 * bounded GET shared by concurrent readers, no options, no lock): resolves the value when it is
 * a fresh hit, `NOT_FRESH` for anything else (a miss, a stale or invalidated value, a Redis
 * failure: never rejects). Undefined at once when no such read applies (nothing seen fresh, a
 * flight of this process for the key, Redis unusable, the cache closed): the caller goes the
 * full way, through `resolve`.
 */
export function readIfFresh(cache: object, key: string): Promise<unknown> | undefined {
  return of(cache).readIfFresh(key);
}

/**
 * When the stored value of `key` stops being served (ms since the epoch, on the store's clock):
 * the end of its `ttl`, or of its own `staleWhileRevalidate` window when it has one; `undefined`
 * when nothing is served for it now.
 */
export function servedUntil(cache: object, key: string): Promise<number | undefined> {
  return of(cache).servedUntil(key);
}

/**
 * When each of `tags` was last invalidated (ms since the epoch on the store's clock, 0: never):
 * `hard` by `invalidateTags(tags)`, `stale` by `invalidateTags(tags, { stale: true })`. A stamp
 * this process follows is answered from memory; the others are read once (one GET each, sent
 * together) and followed from then on. Bounded by `commandTimeout`; rejects with `BackendError`.
 */
export function tagStamps(cache: object, tags: readonly string[]): Promise<{ hard: number; stale: number }[]> {
  return of(cache).tagStamps(tags);
}
