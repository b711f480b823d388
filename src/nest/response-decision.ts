import type { CacheDecision } from '../core/cache.js';
import { responseFreshness, storeDecisionOf } from '../http/freshness.js';
import { HTTP_CACHE_DEFAULTS } from '../http/options.js';
import { mergeTags, validateTags } from '../shared/tag-names.js';

/** The parts of an Express `Response` or a Fastify `FastifyReply` the interceptor reads. */
export interface AnyResponse {
  statusCode?: number;
  getHeaders?(): Record<string, string | string[] | number | undefined>;
  getHeader?(name: string): unknown;
  removeHeader?(name: string): unknown;
}

/** The fields read by this cache only: never sent. */
export interface TakenFields {
  /** `Dogpile-Cache-Control`. */
  targeted?: string;
  /** `Dogpile-Tags`. */
  tagged?: string;
}

/** Takes `Dogpile-Cache-Control` and `Dogpile-Tags` off the response (they never leave the server) and returns their values. */
export function takeFields(res: AnyResponse): TakenFields {
  const out: TakenFields = {};
  for (const [name, field] of [['dogpile-cache-control', 'targeted'], ['dogpile-tags', 'tagged']] as const) {
    const value = res.getHeader?.(name);
    if (value === undefined || value === null) continue;
    res.removeHeader?.(name);
    out[field] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}

/**
 * The tags a `Dogpile-Tags` value gives the entry (comma-separated, trimmed, empty members
 * dropped), none without one, or false when they are not valid tags or too many with the
 * call's: the value is then kept to its own request.
 */
function fieldTags(tagged: string | undefined, callTags: readonly string[] | undefined): string[] | false {
  if (tagged === undefined) return [];
  try {
    const own = validateTags(tagged.split(',').map((t) => t.trim()).filter((t) => t !== ''), 'Dogpile-Tags');
    mergeTags(callTags, own, 'Dogpile-Tags');
    return own;
  } catch {
    return false;
  }
}

/**
 * What the response a handler produced says about storing its value, by the rules of the
 * Express and Fastify adapters (RFC 9111 §3, §4.2, §5.2; RFC 5861; RFC 9213): its headers as
 * the route's `@Header()`s and the handler (or an interceptor inside this one) set them.
 * Their own lifetime (`s-maxage`, `max-age`, `Expires`, in `Dogpile-Cache-Control`, else
 * `CDN-Cache-Control`, else `Cache-Control`) replaces the route's `ttl`, which applies to a
 * response that says nothing; `no-store`, `private`, `Set-Cookie`, `Vary: *`, `no-cache` and a
 * response stale at once (`max-age=0`, a past `Expires`) keep the value to its own request:
 * a stored value has no validators to revalidate it with. A 2xx other than 206 is stored; any
 * other final status only when it is the route's own (`@HttpCode()`: a hit is sent with the
 * route's status) and the response has explicit freshness (or `public`), as in the adapters. A `Dogpile-Tags` header (comma-separated) adds its
 * tags to the call's; invalid ones keep the value to its own request. Undefined outside a
 * response with headers to read.
 */
export function responseDecision(res: AnyResponse, ttl: number, before: TakenFields, callTags: readonly string[] | undefined, routeStatus: number | undefined): CacheDecision | undefined {
  if (typeof res.getHeaders !== 'function') return undefined;
  const taken = takeFields(res);
  const targeted = taken.targeted ?? before.targeted;
  const tags = fieldTags(taken.tagged ?? before.tagged, callTags);
  if (tags === false) return 'private';
  const headers: Record<string, string | string[] | number | undefined> = { ...res.getHeaders() };
  if (targeted !== undefined) headers['dogpile-cache-control'] = targeted;
  const status = typeof res.statusCode === 'number' ? res.statusCode : 200;
  const success = status >= 200 && status <= 299 && status !== 206;
  // Another final status only when it is the route's own (a hit is sent with that one); then,
  // as in the adapters, its explicit freshness (or `public`) lets it be stored (RFC 9111 §3).
  if (!success && status !== routeStatus) return 'private';
  const f = responseFreshness(status, headers, {
    now: Date.now(),
    defaultTtl: ttl,
    // A route's own TTL is never cut; a response's lifetime is capped as in the adapters.
    maxTtl: Math.max(HTTP_CACHE_DEFAULTS.maxTtl, ttl),
    statuses: success ? [status] : [],
  });
  if (!f.storable || f.ttl < 1) return 'private';
  const decision = storeDecisionOf(f, f.ttl);
  if (tags.length > 0) decision.tags = tags;
  return decision;
}
