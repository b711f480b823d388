import { MAX_DURATION_MS } from '../../shared/duration.js';
import type { StoreDecision } from '../../core/types.js';

/*
 * cache-manager's lifetimes on this cache. A TTL is ms (or a duration string: `durationOrZero`); `0` or none
 * means "as long as the cache keeps anything", which here is `MAX_DURATION_MS`. A
 * `refreshThreshold` is the end of a value's life during which `wrap()` answers it at once and
 * refreshes it: the entry is fresh for `ttl - refreshThreshold`, then served stale inside a
 * `staleWhileRevalidate` window of `refreshThreshold` while one refresh runs across every
 * process (see docs/stale-values.md).
 */

/** The lifetime of a value in ms: the first TTL given that is over 0, else the longest. */
export function lifetime(...ttls: (number | undefined)[]): number {
  for (const ttl of ttls) if (ttl !== undefined && ttl > 0) return ttl;
  return MAX_DURATION_MS;
}

/** How a value that lives `ttl` ms, refreshed in its last `refreshThreshold` ms, is stored. */
export function storeFor(ttl: number, refreshThreshold: number | undefined): StoreDecision {
  if (refreshThreshold === undefined || refreshThreshold <= 0) return { decision: 'store', ttl };
  // A threshold at or past the TTL refreshes at every read after the first millisecond.
  const fresh = Math.max(1, ttl - refreshThreshold);
  return { decision: 'store', ttl: fresh, staleWhileRevalidate: ttl - fresh };
}
