import type { IncomingHttpHeaders } from 'node:http';
import type { FreshnessOptions, FreshnessRules } from '../../core/freshness.js';
import { routeWindow } from '../rules/freshness.js';
import type { CacheStatusEntry } from '../rules/cache-status.js';
import type { StoredResponse } from '../rules/response-format.js';
import { prepareResponse, remainingFreshness, type PreparedResponse, type ServableResponse, type XCache } from './serve.js';

/**
 * Serving a stored response when the origin fails (RFC 5861 §4, `stale-if-error`): the
 * handler's response is one of these statuses, or never arrives (the handler throws, its
 * upstream closes the connection: the framework then answers a 500 or 502 itself).
 */
export const ORIGIN_ERROR_STATUSES: ReadonlySet<number> = new Set([500, 502, 503, 504]);

/** How far past a response's lifetime its entry's own end may still come (the write's delay after `createdAt`). */
const EXPIRY_EDGE_MS = 1000;

/**
 * Whether a stored response `overdue` ms past its lifetime, whose entry the store still holds
 * fresh, is at the edge of that entry's end (at most `EXPIRY_EDGE_MS` past it: an entry kept
 * long past its lifetime, for revalidation, is revalidated) and may be served stale until then:
 * it had a lifetime, its headers do not forbid serving it stale, and the route's
 * `staleWhileRevalidate` window (`revalidateWindow`, ms) covers it.
 */
export function atExpiryEdge(stored: StoredResponse, overdue: number, revalidateWindow: number): boolean {
  if (overdue > EXPIRY_EDGE_MS || stored.freshFor === undefined || stored.freshFor < 1 || stored.staleIfError === 0) return false;
  return revalidateWindow > overdue;
}

/**
 * How a stored response that the cache answered with (`xCache`) is used, `remaining` ms before
 * the end of its freshness (negative: past it): as it was answered while fresh, or found stale
 * inside a stale window; at the edge of its entry's end (`atExpiryEdge`, the route's
 * `staleWhileRevalidate`), as `STALE`; past its freshness otherwise, not reused without the
 * handler (RFC 9111 §4.2.4, §4.3): a stored one is revalidated when the request can run as a GET
 * (`'revalidate'`), and a request that waited for one (collapsed) runs its own handler (`'handler'`).
 */
export function reuseOf(
  stored: StoredResponse,
  remaining: number,
  xCache: XCache,
  canRevalidate: boolean,
  route: FreshnessOptions,
  rules: FreshnessRules,
): XCache | 'revalidate' | 'handler' {
  if (remaining > 0 || xCache === 'STALE') return xCache;
  // The response's lifetime counts from its `createdAt`, its entry's from the write that
  // followed: for a moment the entry is fresh and the response is not. Inside a stale window
  // it is served as stale, as it will be once the entry's end comes (its refresh follows then).
  if (xCache === 'HIT' && atExpiryEdge(stored, -remaining, routeWindow(route, rules, 'staleWhileRevalidate'))) return 'STALE';
  return xCache === 'HIT' && canRevalidate ? 'revalidate' : 'handler';
}

/**
 * Whether `stored` may stand in for the origin's failure at `now` (the cache's clock, the one
 * it was stored on): within its freshness plus its own `stale-if-error` window, else the
 * route's (`routeStaleIfError`). Never one whose headers forbid it, nor one stored without its
 * lifetime.
 */
function servableOnError(stored: StoredResponse, now: number, routeStaleIfError: number): boolean {
  if (stored.freshFor === undefined) return false;
  const window = stored.staleIfError ?? routeStaleIfError;
  return window > 0 && now < stored.createdAt + stored.freshFor + window;
}

/**
 * What the client of a run whose handler answered `status` gets instead: `stored` (the response
 * the run refreshes) as a stale hit, when `status` is an origin failure and `servableOnError`
 * allows it; else undefined. `conditional` is the client's own `If-None-Match` /
 * `If-Modified-Since` (a match gets a 304); `member` formats this cache's `Cache-Status` member.
 */
export function staleInsteadOf(
  status: number,
  stored: ServableResponse | undefined,
  now: number,
  routeStaleIfError: number,
  conditional: IncomingHttpHeaders,
  method: 'GET' | 'HEAD',
  member: (entry: CacheStatusEntry) => string,
): PreparedResponse | undefined {
  if (stored === undefined || !ORIGIN_ERROR_STATUSES.has(status) || !servableOnError(stored, now, routeStaleIfError)) return undefined;
  const cacheStatus = member({ hit: true, ttl: remainingFreshness(stored, now), detail: 'stale-if-error' });
  return prepareResponse(stored, conditional, 'STALE', now, cacheStatus, method);
}
