import { CacheDirectives, MAX_DELTA_SECONDS, parseCacheControl, selectCacheDirectives, type PolicySource } from './cache-control.js';
import { fieldLines, fieldValue, singletonField, type HeaderBag } from './header-bag.js';
import { parseHttpDate } from './http-date.js';
import type { StoreDecision } from '../../core/cache.js';
import type { FreshnessOptions as StaleServingOptions, FreshnessRules } from '../../core/freshness.js';
import { durationOrZero } from '../../shared/option-table.js';

/**
 * The statuses RFC 9110 §15.1 calls heuristically cacheable. This cache uses no heuristic
 * lifetime: a response of any final status (these or others) with explicit freshness is
 * storable whatever the adapter's `statuses` list says.
 */
export const HEURISTICALLY_CACHEABLE = new Set([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]);

export interface FreshnessOptions {
  /** The current time, ms since the epoch. */
  now: number;
  /** Lifetime (ms) of a response that says nothing about its freshness; 0 stores only responses with explicit freshness. */
  defaultTtl: number;
  /** Upper bound (ms) of the remaining lifetime and of each stale window. */
  maxTtl: number;
  /** Statuses that may be stored on `defaultTtl` (the adapter's `statuses`). */
  statuses: ReadonlySet<number> | readonly number[];
  /** When the response was received, ms since the epoch; defaults to `now`. */
  responseTime?: number;
}

export type Freshness =
  | { storable: false; reason: string }
  | {
      storable: true;
      /** How long (ms) the response is fresh from `now`: its lifetime minus its current age, capped by `maxTtl`; 0 = stale at once. */
      ttl: number;
      /** The lifetime came from the response (`s-maxage`, `max-age`, `Expires`), not from `defaultTtl`. */
      explicit: boolean;
      /** RFC 5861 `stale-while-revalidate` window (ms), when the response grants one and nothing forbids it. */
      staleWhileRevalidate?: number;
      /** RFC 5861 `stale-if-error` window (ms), likewise. */
      staleIfError?: number;
      /**
       * Never serve this response stale, not even when the origin fails: `must-revalidate`,
       * `proxy-revalidate`, `s-maxage` (RFC 9111 §5.2.2.2, §5.2.2.8, §5.2.2.10), bare
       * `no-cache` (§5.2.2.4) or `Pragma: no-cache` without `Cache-Control` (§5.4).
       */
      mustRevalidate: boolean;
      /**
       * Header fields to leave out of the stored copy: those named by `no-cache="..."` (the
       * rest may be reused without revalidation, §5.2.2.4) and `private="..."` (a shared cache
       * must not store them, §5.2.2.7). Lower-case.
       */
      omitHeaders: string[];
      /** The `Age` (s) the response had when received (RFC 9111 §4.2.3), the base of {@link currentAge}. */
      initialAge: number;
      /** The field the policy came from (a targeted field replaces `Cache-Control`, RFC 9213). */
      source: PolicySource;
    };

/**
 * Whether and for how long a shared cache may reuse a response (RFC 9111 §3, §4.2, §5.2;
 * RFC 5861; RFC 9213). Header names must be the record's keys in any case.
 *
 * Not storable: a 206 (this cache stores full responses only); `no-store`; bare `private`;
 * `Set-Cookie`; `Vary: *`; a status outside `statuses` unless the response has explicit
 * freshness (`public` with a `defaultTtl` too: it stands in for a heuristic lifetime), which
 * lets any final status but 304 be stored (RFC 9111 §3); no explicit freshness while
 * `defaultTtl` is 0; bare `no-cache` (or `Pragma: no-cache` alone) without a validator
 * (`ETag`/`Last-Modified`): every reuse would need a full run of the handler anyway.
 *
 * Bare `no-cache` with a validator is storable with `ttl` 0 and `mustRevalidate`: each reuse
 * first revalidates with the handler (a conditional request), never serving it without that.
 *
 * Lifetime (§4.2.1): `s-maxage`, else `max-age`, else `Expires − Date` (`Date` absent or
 * invalid: the response time); an invalid or conflicting value of the one that applies, or an
 * invalid `Expires` (`0`, `-1`, garbage), is a lifetime of 0 (stale at once, not reused without
 * revalidation, §4.2.1 and §5.3). Without any of them, `defaultTtl`. The current age (the
 * larger of `Age` and the apparent age `response time − Date`, §4.2.3, plus the time since
 * the response time) is subtracted; the rest is capped by `maxTtl`.
 */
export function responseFreshness(status: number, headers: HeaderBag, options: FreshnessOptions): Freshness {
  const { now, defaultTtl, maxTtl } = options;
  const responseTime = options.responseTime ?? now;
  const statuses = options.statuses instanceof Set ? options.statuses : new Set(options.statuses as readonly number[]);

  if (status === 206) return { storable: false, reason: 'status 206' };
  const { directives, source } = selectCacheDirectives(headers);
  const hasCacheControl = source !== 'cache-control' || fieldLines(headers, 'cache-control').length > 0;

  if (directives.has('no-store')) return { storable: false, reason: `${source}: no-store` };
  const privateFields = directives.fieldNames('private');
  if (privateFields === true) return { storable: false, reason: `${source}: private` };
  if (fieldLines(headers, 'set-cookie').length > 0) return { storable: false, reason: 'set-cookie' };
  if (varyStar(headers)) return { storable: false, reason: 'vary: *' };

  const lifetime = explicitLifetime(directives, source, headers, responseTime);
  const explicit = lifetime !== undefined;
  if (!storableStatus(status, statuses, explicit, directives.has('public') && defaultTtl > 0)) {
    return { storable: false, reason: `status ${status}` };
  }
  if (!explicit && !(defaultTtl > 0)) return { storable: false, reason: 'no explicit freshness' };

  const noCacheFields = directives.fieldNames('no-cache');
  const pragmaNoCache = !hasCacheControl && parseCacheControl(fieldLines(headers, 'pragma')).has('no-cache');
  const noCache = noCacheFields === true || pragmaNoCache;
  if (noCache && !hasValidator(headers)) {
    return { storable: false, reason: pragmaNoCache ? 'pragma: no-cache' : `${source}: no-cache` };
  }

  const initialAge = initialAgeOf(headers, responseTime);
  const residentMs = Math.max(0, now - responseTime);
  const lifetimeMs = explicit ? lifetime : defaultTtl;
  const ttl = noCache ? 0 : clamp(lifetimeMs - initialAge * 1000 - residentMs, maxTtl);

  const mustRevalidate =
    noCache || directives.has('must-revalidate') || directives.has('proxy-revalidate') || directives.has('s-maxage');

  const omitHeaders = [...new Set([...(Array.isArray(noCacheFields) ? noCacheFields : []), ...(privateFields ?? [])])];
  const result: Freshness = { storable: true, ttl, explicit, mustRevalidate, omitHeaders, initialAge, source };
  if (!mustRevalidate) {
    const swr = directives.seconds('stale-while-revalidate');
    if (typeof swr === 'number' && swr > 0) result.staleWhileRevalidate = clamp(swr * 1000, maxTtl);
    const sie = directives.seconds('stale-if-error');
    if (typeof sie === 'number' && sie > 0) result.staleIfError = clamp(sie * 1000, maxTtl);
  }
  return result;
}

/**
 * Whether a response's status lets it be stored (RFC 9111 §3): one of the adapter's `statuses`;
 * else any final status when the response gives its own lifetime (`explicit`) or says `public`
 * while a default lifetime stands in for a heuristic one (`publicWithDefault`). A 304 is an
 * answer to a conditional request, never a response of its own to store; a 206 never gets here.
 */
function storableStatus(status: number, statuses: ReadonlySet<number>, explicit: boolean, publicWithDefault: boolean): boolean {
  if (statuses.has(status)) return true;
  const final = status >= 200 && status <= 999 && status !== 304;
  return final && (explicit || publicWithDefault);
}

/**
 * What the cache is told to do with a storable response kept `storageTtl` ms: a response that
 * must be revalidated once stale (`must-revalidate`, `no-cache`, `s-maxage`...) is never kept
 * stale; one with its own `stale-while-revalidate` / `stale-if-error` is kept stale for that
 * long (RFC 5861) instead of the adapter's windows; any other gets the adapter's.
 */
export function storeDecisionOf(f: Extract<Freshness, { storable: true }>, storageTtl: number): StoreDecision {
  const decision: StoreDecision = { decision: 'store', ttl: storageTtl };
  if (f.mustRevalidate) {
    decision.staleWhileRevalidate = 0;
    decision.staleIfError = 0;
  } else {
    if (f.staleWhileRevalidate !== undefined) decision.staleWhileRevalidate = f.staleWhileRevalidate;
    if (f.staleIfError !== undefined) decision.staleIfError = f.staleIfError;
  }
  return decision;
}

function clamp(ms: number, maxTtl: number): number {
  return Math.max(0, Math.min(ms, maxTtl));
}

function varyStar(headers: HeaderBag): boolean {
  return fieldLines(headers, 'vary').some((line) => line.split(',').some((s) => s.trim() === '*'));
}

function hasValidator(headers: HeaderBag): boolean {
  return fieldValue(headers, 'etag') !== undefined || parseHttpDate(singletonField(headers, 'last-modified').value) !== undefined;
}

/**
 * The explicit lifetime in ms (RFC 9111 §4.2.1), or undefined when the response has none.
 * For a shared cache `s-maxage` comes first; a targeted field replaces `Expires` too.
 */
function explicitLifetime(directives: CacheDirectives, source: PolicySource, headers: HeaderBag, responseTime: number): number | undefined {
  for (const name of ['s-maxage', 'max-age']) {
    const s = directives.seconds(name);
    if (s === 'invalid') return 0;
    if (s !== undefined) return s * 1000;
  }
  if (source !== 'cache-control') return undefined;
  const expires = singletonField(headers, 'expires');
  if (expires.conflict) return 0;
  if (expires.value === undefined) return undefined;
  const expiresAt = parseHttpDate(expires.value);
  if (expiresAt === undefined) return 0;
  const date = parseHttpDate(singletonField(headers, 'date').value) ?? responseTime;
  return Math.min(Math.max(0, expiresAt - date), MAX_DELTA_SECONDS * 1000);
}

/**
 * The `Age` header in seconds (RFC 9111 §5.1): the first member of a list, undefined when
 * absent or invalid (anything but `1*DIGIT`), at most 2^31.
 */
export function parseAge(headers: HeaderBag): number | undefined {
  const first = fieldLines(headers, 'age')[0]?.split(',')[0]?.trim();
  if (first === undefined || !/^[0-9]+$/.test(first)) return undefined;
  return first.replace(/^0+(?=\d)/, '').length > 10 ? MAX_DELTA_SECONDS : Math.min(Number(first), MAX_DELTA_SECONDS);
}

/**
 * The age (s) of a response when received (RFC 9111 §4.2.3, `corrected_initial_age` with no
 * response delay, the origin being in the same process): the larger of its `Age` and its
 * apparent age (`response time − Date`, whole seconds, never negative).
 */
export function initialAgeOf(headers: HeaderBag, responseTime: number): number {
  const age = parseAge(headers) ?? 0;
  const date = parseHttpDate(singletonField(headers, 'date').value);
  const apparent = date === undefined ? 0 : Math.max(0, Math.floor(responseTime / 1000) - Math.floor(date / 1000));
  return Math.min(Math.max(age, apparent), MAX_DELTA_SECONDS);
}

/**
 * The `Age` (integer seconds) to send with a stored response (RFC 9111 §4.2.3, simplified for a
 * cache that stores the response itself): the age it arrived with plus the whole seconds it
 * has spent in the cache. A clock that went back counts as no time spent. At most 2^31.
 */
export function currentAge(storedAt: number, ageOnArrival: number, now: number): number {
  const resident = Math.max(0, Math.floor((now - storedAt) / 1000));
  const base = Number.isFinite(ageOnArrival) && ageOnArrival > 0 ? Math.floor(ageOnArrival) : 0;
  return Math.min(base + resident, MAX_DELTA_SECONDS);
}

/**
 * The response's own `stale-if-error` window (ms) as it is stored with it: 0 when its headers
 * forbid serving it stale (`must-revalidate`, `proxy-revalidate`, `s-maxage`, bare `no-cache`),
 * undefined when they say nothing (the route's window applies). The same the core is told
 * (`storeDecisionOf`).
 */
export function ownStaleIfError(f: Extract<Freshness, { storable: true }>): number | undefined {
  return f.mustRevalidate ? 0 : f.staleIfError;
}

/** A stale window (ms) of a route: its own option, else the cache's. */
export function routeWindow(route: StaleServingOptions, rules: FreshnessRules, name: 'staleWhileRevalidate' | 'staleIfError'): number {
  const given = route[name];
  return given === undefined ? rules[name] : durationOrZero(given, name);
}
