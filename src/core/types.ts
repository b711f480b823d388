import type { Duration } from '../shared/duration.js';
import type { FreshnessOptions } from './freshness.js';

export interface LoaderContext {
  /** The cache key being computed. */
  key: string;
  /**
   * Aborts with `LockLostError` if this caller's lead is lost (another process took over), or
   * with `LoaderTimeoutError` when `hardTimeout` passes.
   */
  signal: AbortSignal;
  /**
   * When this run refreshes a stored value past its `ttl` (stale-while-revalidate, a refresh
   * under staleIfError, early refresh): that value and when it was made. The HTTP adapters
   * use it to refresh a response with its validators (a conditional request).
   */
  stale?: { value: unknown; createdAt: number };
  /**
   * Stores this result for `ttl` (ms or a duration string like `'30s'`) instead of the call's
   * `ttl`. Overrides the `ttl` of any decision (`decide`, `cacheable`).
   * @throws InvalidOptionError (naming `ctx.setTtl`) for a duration that is not over 0.
   */
  setTtl(ttl: Duration): void;
  /** Adds tags to this result's entry (with the call's `tags`). @throws InvalidOptionError (naming `ctx.setTags`). */
  setTags(tags: readonly string[]): void;
  /** Does not store this result: it is handed to the callers waiting now (as `decide('share')`). */
  skip(): void;
  /**
   * This result's verdict, in place of the call's `cacheable` (see `CacheDecision`). The last
   * call wins; `setTtl` and `setTags` still apply to a stored result.
   * @throws InvalidOptionError (naming `ctx.decide`) for a verdict that is not a `CacheDecision`.
   */
  decide(decision: CacheDecision): void;
}

export type Loader<T> = (ctx: LoaderContext) => T | Promise<T>;

/**
 * What happens to a loader's result:
 * - `'store'`: cached for `ttl` and handed to every waiter;
 * - `'share'`: handed to every current waiter but not cached (the default for `undefined`);
 * - `'private'`: returned only to the caller whose loader produced it; waiters run their own
 *   loader, and with `hitForMissTtl` the next callers skip waiting for a while.
 */
export type CacheDecision = 'store' | 'share' | 'private' | StoreDecision;

/**
 * `'store'` with what only the result can tell (an HTTP response's own lifetime): `ttl` (ms,
 * over 0) replaces the call's `ttl` for this result. `staleWhileRevalidate` / `staleIfError`
 * (ms) are the result's own stale windows: when either is given, the entry is kept past `ttl`
 * for the longer of the two instead of the call's windows (0 and 0: never served stale).
 */
export interface StoreDecision {
  decision: 'store';
  ttl: number;
  staleWhileRevalidate?: number;
  staleIfError?: number;
  /** Tags of this result, added to the call's `tags`. */
  tags?: string[];
}

/** The stale-serving options (staleWhileRevalidate, staleIfError, ...) override the cache's for this call. */
export interface GetOrComputeOptions<T = unknown> extends FreshnessOptions {
  /** How long the value stays cached: ms or a string like `'30s'`, `'5m'`. */
  ttl: Duration;
  /** Overrides the cache's `lockTtl` for this call. */
  lockTtl?: Duration;
  /** Overrides the cache's `waitTimeout` for this call. */
  waitTimeout?: Duration;
  /** Overrides the cache's `onWaitTimeout` for this call. */
  onWaitTimeout?: 'throw' | 'load';
  /** Overrides the cache's `onRemoteError` for this call. */
  onRemoteError?: 'throw' | 'load';
  /** Stops this caller's wait (not the shared loader, which others may be waiting for). */
  signal?: AbortSignal;
  /**
   * Runs the loader now whatever is stored (joining a run already in flight for the key, one
   * fleet-wide) and stores its result; other callers keep being answered from what is stored
   * meanwhile. @default false
   */
  forceRefresh?: boolean;
  /** Decides what happens to the result. @default undefined → 'share', anything else → 'store' */
  cacheable?: (value: T) => CacheDecision;
  /** Overrides the cache's `hitForMissTtl` for a `'private'` result of this call. */
  hitForMissTtl?: Duration;
  /**
   * Tags of the stored value: `invalidateTags` on any of them makes it a miss (or stale), in
   * every process. At most `MAX_TAGS` (64) non-empty strings.
   */
  tags?: readonly string[];
}

/** `set()` options: the TTL and the value's tags. */
export interface SetOptions {
  ttl: Duration;
  tags?: readonly string[];
}

/** `invalidateTags()` options. */
export interface InvalidateTagsOptions {
  /**
   * Make the entries stale instead of a miss: within their `staleWhileRevalidate` window they
   * are served at once while one refresh runs fleet-wide (an entry with no stale window
   * becomes a miss). @default false
   */
  stale?: boolean;
}

/** `clear()` options. */
export interface ClearOptions {
  /**
   * Make the entries stale instead of a miss: within their `staleWhileRevalidate` window they
   * are served at once while one refresh runs fleet-wide (an entry with no stale window
   * becomes a miss). @default false
   */
  stale?: boolean;
}

/** How a call was answered. */
export type CacheStatus = 'hit' | 'miss' | 'coalesced' | 'pass' | 'stale';

/** Why a stale value was served: it is being refreshed, the refresh failed, or the loader was slow (`softTimeout`). */
export type StaleReason = 'revalidate' | 'error' | 'timeout';

export interface CacheResult<T> {
  value: T;
  /**
   * `hit`: from the cache; `miss`: this caller ran the loader as the leader; `coalesced`:
   * another caller's loader run (in this process or another); `pass`: this caller ran its own
   * loader without coordination (a private result, a hit-for-miss marker, a wait timeout with
   * `onWaitTimeout: 'load'`); `stale`: a value past its `ttl`, inside a stale window (see `staleReason`).
   */
  status: CacheStatus;
  /** With `status: 'stale'`: why the stale value was served. */
  staleReason?: StaleReason;
  /** When the value was computed (ms since the epoch). */
  createdAt: number;
  /** True when Redis could not be used for this call. */
  degraded: boolean;
}
