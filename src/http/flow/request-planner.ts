import type { FreshnessOptions } from '../../core/freshness.js';
import { validateTags } from '../../shared/tag-names.js';
import { MAY_BYPASS, requestBypassReason, requestScanner, UNKEYED_INPUT, type RequestScan } from '../rules/cacheability.js';
import { isValidHost, requestHost } from '../rules/cache-key.js';
import { checkKey, type ResolvedHttpCacheOptions } from '../options.js';
import { keyAuthority, RequestClaims, requestBaseKey, withUrlTag } from './request-plan.js';
import type { CachePlan, Exchange, HttpRequestInfo } from './plan-types.js';

/**
 * Raw requests (`IncomingMessage`) already handled by a guard, so an app-wide and a route guard
 * never both act; a request injected for a background refresh is claimed before the app sees it,
 * so every guard lets it through. Shared by every copy of dogpile-guard in the process: one read
 * tells a guard both.
 */
export const handled = new RequestClaims('handled', true);

/** A request a plain hit answers as it is: no validators to evaluate, no range to cut (`plainHit`). */
export function asksPlainly(plan: CachePlan): boolean {
  return plan.lookupOnly !== true && plan.headers['if-none-match'] === undefined && plan.headers['if-modified-since'] === undefined;
}

/**
 * A request answered from a stored response or else by its own handler, never leading nor
 * storing: a HEAD that cannot run as a GET (an explicit HEAD handler produces no body to store),
 * or a GET with `Range` (`lookupOnly`).
 */
export function answersOnly(plan: CachePlan, exchange: Exchange): boolean {
  return (plan.head && exchange.headAsGet !== true) || plan.lookupOnly === true;
}

/**
 * Which requests a guard handles, from its options: the plan of a GET or HEAD it may handle
 * (its key, its tags, whether it only looks up), and the reason a request rule makes one pass.
 */
export class RequestPlanner<Req> {
  /** The request fields that pass a request as a credential: none when a `key` function includes the identity. */
  private readonly privateNames: readonly string[];
  private readonly scan: RequestScan;

  constructor(private readonly options: ResolvedHttpCacheOptions<Req>) {
    this.privateNames = options.key === undefined ? options.privateHeaders : [];
    this.scan = requestScanner(this.privateNames);
  }

  /** The plan of a request the cache handles, or undefined for one it lets through untouched. */
  plan(req: Req, info: HttpRequestInfo, ttl: number, freshness: FreshnessOptions): CachePlan | undefined {
    const { method, headers } = info;
    if (method !== 'GET' && method !== 'HEAD') return undefined;
    const { key: keyFn, skip } = this.options;
    if (skip !== undefined && skip(req)) return undefined;
    const scan = this.scan(headers);
    // Most requests carry none of the fields that may make them pass: then only the host is checked.
    const reason = (scan & MAY_BYPASS) !== 0 ? requestBypassReason(method, headers, this.privateNames) : isValidHost(requestHost(headers)) ? undefined : 'host';
    // A GET with Range is answered from a stored full response when there is one (lookupOnly).
    const range = reason === 'range' && method === 'GET';
    if (reason !== undefined && !range) return undefined;
    let userKey: string | undefined;
    if (keyFn !== undefined) {
      userKey = checkKey(keyFn(req));
      if (userKey === undefined) return undefined;
    }
    // Forwarding fields that put the request under a key of its own (and give it its URL's tag).
    const unkeyed = userKey === undefined && (scan & UNKEYED_INPUT) !== 0;
    const authority = keyAuthority(info);
    const base = requestBaseKey(method, info.url, headers, userKey, unkeyed, authority);
    const tags = userKey === undefined ? withUrlTag(this.requestTags(req), info.url, headers, unkeyed, authority) : this.requestTags(req);
    if (tags === false) return undefined; // no room left for the URL's tag: passes uncached
    return { head: method === 'HEAD', url: info.url, base, key: base, ttl, headers, retried: false, lookupOnly: range, freshness, userKey: userKey !== undefined, tags };
  }

  /** Why a request rule makes a GET or HEAD pass the cache (`requestBypassReason`), or undefined. */
  bypassReason(info: HttpRequestInfo): string | undefined {
    if (info.method !== 'GET' && info.method !== 'HEAD') return undefined;
    return requestBypassReason(info.method, info.headers, this.privateNames);
  }

  /** The `tags` option's tags for a request (validated: `InvalidOptionError`), or undefined for none. */
  private requestTags(req: Req): readonly string[] | undefined {
    const tagsFn = this.options.tags;
    if (tagsFn === undefined) return undefined;
    const given = tagsFn(req);
    if (given === undefined || given === null) return undefined;
    const tags = validateTags(given, 'tags');
    return tags.length > 0 ? tags : undefined;
  }
}
