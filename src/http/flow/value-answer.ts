/**
 * The pipeline's rules for a platform that caches the handler's value and serialises it itself
 * (Nest's `@Cached`): the same decisions the response cache makes, read from the headers the
 * platform's response carries. The value cache names no header and holds no rule of its own.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { CacheDecision } from '../../core/cache.js';
import { escapeKey, HTTP_KEY_PREFIX, userCacheKey } from '../rules/cache-key.js';
import { responseNotStorableReason } from '../rules/cacheability.js';
import { formatCacheStatus, type CacheStatusEntry } from '../rules/cache-status.js';
import { responseFreshness, storeDecisionOf } from '../rules/freshness.js';
import { headerValue, parseVary } from '../rules/headers.js';
import { HTTP_CACHE_DEFAULTS } from '../options.js';
import { ageSeconds, withVary } from './request-plan.js';
import type { XCache } from './serve.js';
import { fieldTags, takeTagsField, takeTargetedField } from '../rules/targeted-fields.js';

/** The fields read by this cache only (`Dogpile-Cache-Control`, `Dogpile-Tags`), taken off a response: never sent. */
export interface OwnFields {
  targeted?: string;
  tagged?: string;
}

type HeaderAccess = { getHeader(name: string): unknown; removeHeader(name: string): unknown };

/** Takes the fields only this cache reads off a response (the platform never sends them) and returns their values. */
export function takeOwnFields(res: Partial<HeaderAccess>): OwnFields {
  if (typeof res.getHeader !== 'function' || typeof res.removeHeader !== 'function') return {};
  const out: OwnFields = {};
  const targeted = takeTargetedField(res as HeaderAccess);
  if (targeted !== undefined) out.targeted = targeted;
  const tagged = takeTagsField(res as HeaderAccess);
  if (tagged !== undefined) out.tagged = tagged;
  return out;
}

/** A route's response as the value cache sees it once the handler has run. */
interface ValueResponse {
  status: number;
  headers: OutgoingHttpHeaders;
  /** The fields only this cache reads, taken off the response before the handler ran and after. */
  own: OwnFields;
}

/** What the route says of its responses before any runs. */
export interface ValueRoute {
  /** The route's TTL (ms): the lifetime of a response that states none, never cut by `maxTtl`. */
  ttl: number;
  /** The route's own tags. */
  tags: readonly string[] | undefined;
  /** The route's own status (a hit is sent with it), if it has one. */
  status: number | undefined;
}

/**
 * What a route's response says about storing the value it carries, by the rules of the
 * response cache (RFC 9111 §3, §4.2, §5.2; RFC 5861; RFC 9213): its own lifetime
 * (`Dogpile-Cache-Control`, else `CDN-Cache-Control`, else `Cache-Control`; `Expires`)
 * replaces the route's `ttl`; `no-store`, `private`, `Set-Cookie`, `Vary: *`, `no-cache` and a
 * response stale at once keep the value to its own request (a stored value has no validators
 * to revalidate it with). A 2xx other than 206 is stored; another final status only when it
 * is the route's own and the response has explicit freshness (or `public`). `Dogpile-Tags`
 * adds its tags to the route's; invalid ones keep the value to its own request. `now` is the
 * wall clock the response's HTTP dates are compared with (RFC 9111 §4.2.3).
 */
export function valueDecision(response: ValueResponse, route: ValueRoute, now: number): CacheDecision {
  const tags = fieldTags(response.own.tagged, route.tags);
  if (tags === false) return 'private';
  const headers = response.own.targeted === undefined ? response.headers : { ...response.headers, 'dogpile-cache-control': response.own.targeted };
  const { status } = response;
  const success = status >= 200 && status <= 299 && status !== 206;
  if (!success && status !== route.status) return 'private';
  const f = responseFreshness(status, headers, {
    now,
    defaultTtl: route.ttl,
    maxTtl: Math.max(HTTP_CACHE_DEFAULTS.maxTtl, route.ttl),
    statuses: success ? [status] : [],
  });
  if (!f.storable || f.ttl < 1) return 'private';
  const decision = storeDecisionOf(f, f.ttl);
  if (tags.length > 0) decision.tags = tags;
  return decision;
}

const STATUS_OK: ReadonlySet<number> = new Set([200]);

/**
 * What the headers a route sets on every response, whatever the request (Nest's `@Header()`),
 * say before any request: why none of its responses may be stored (`Set-Cookie`,
 * `Cache-Control: private | no-store | no-cache`, `Vary: *`), and the request headers its
 * `Vary` makes part of the key.
 */
export function fixedHeaderRules(fields: ReadonlyArray<readonly [name: string, value: string]>): { notStorable: string | undefined; vary: string[] } {
  if (fields.length === 0) return { notStorable: undefined, vary: [] };
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of fields) headers[name.toLowerCase()] = value;
  const notStorable = responseNotStorableReason({ status: 200, headers, tooBig: false }, STATUS_OK);
  if (notStorable !== undefined) return { notStorable, vary: [] };
  const vary = parseVary(headerValue(headers, 'vary'));
  return { notStorable: undefined, vary: vary === '*' ? [] : vary };
}

/**
 * The header fields of a value a value cache answers an HTTP request with (Nest's `@Cached`,
 * whose platform serialises the value): `X-Cache`; `Age` for a value from the cache
 * (`createdAt` on the cache's clock, `now`); and the same outcome as `Cache-Status` (RFC 9211),
 * with the value's remaining lifetime on a hit when its `ttl` is known.
 */
export function valueInstructions(xCache: XCache, now: number, createdAt?: number, ttl?: number): Array<[name: string, value: string]> {
  const fields: Array<[string, string]> = [['x-cache', xCache]];
  if (createdAt !== undefined) fields.push(['age', String(ageSeconds(createdAt, now))]);
  const entry: CacheStatusEntry =
    xCache === 'HIT'
      ? { hit: true, ttl: ttl !== undefined && createdAt !== undefined ? ttl - (now - createdAt) : undefined }
      : xCache === 'COALESCED'
        ? { fwd: 'miss', collapsed: true }
        : { fwd: 'miss' };
  fields.push(['cache-status', formatCacheStatus(entry)]);
  return fields;
}

/**
 * The key a value is stored under, from the key its route chose (`tracked`): one that starts
 * like the default keys (a `trackBy()` override extending the default) is kept as it is, but
 * escaped like a user key so that no newline reaches the `Vary` part; any other is a user key.
 * Over HTTP, the request headers the route's `Vary` names follow (`withVary`).
 */
export function valueKey(tracked: string, http?: { vary: readonly string[]; headers: IncomingHttpHeaders }): string {
  const base = tracked.startsWith(HTTP_KEY_PREFIX) ? escapeKey(tracked) : userCacheKey(tracked);
  return http === undefined ? base : withVary(base, http.vary, http.headers);
}
