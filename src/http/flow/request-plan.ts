import type { IncomingHttpHeaders } from 'node:http';
import { MAX_TAGS } from '../../shared/tag-names.js';
import { defaultCacheKey, hasUnkeyedInput, requestHost, urlTag, userCacheKey, varyKeySuffix } from '../rules/cache-key.js';
import { requestBypassReason } from '../rules/cacheability.js';

/**
 * Request planning shared by every adapter (the Express and Fastify guard, the Nest
 * interceptor): which requests the cache may handle, their key and its `Vary` part, the
 * marker that keeps one request from being handled twice, and `Age`.
 */

/**
 * True when the cache may handle the request: GET or HEAD (HEAD shares the GET entry), a
 * well-formed `Host`, no body, and none of `privateHeaders` (pass `[]` when a key function
 * includes the identity).
 */
export function cacheableRequest(method: string, headers: IncomingHttpHeaders, privateHeaders: readonly string[]): boolean {
  return (method === 'GET' || method === 'HEAD') && requestBypassReason(method, headers, privateHeaders) === undefined;
}

/** The key of a request without its `Vary` part: the user's key (namespaced) or method + host + path + sorted query. */
export function requestBaseKey(method: string, url: string, headers: IncomingHttpHeaders, userKey: string | undefined, unkeyed = hasUnkeyedInput(headers), authority?: string): string {
  return userKey !== undefined ? userCacheKey(userKey) : defaultCacheKey(method, url, headers, unkeyed, authority);
}

/**
 * The authority a request's default key is built from: the `Host` field, or, where the handler
 * sees more than it (`HttpRequestInfo.origin`: another scheme, another authority), that.
 */
export function keyAuthority(info: { headers: IncomingHttpHeaders; origin?: string }): string {
  return info.origin ?? requestHost(info.headers);
}

/**
 * The tags of a request under a default key: `tags`, plus its URL's tag (`urlTag`) when it
 * carries forwarding headers and so has a key of its own, which lets a write reach its
 * responses whatever the write carried; false when `tags` leave no room for it (`MAX_TAGS`).
 */
export function withUrlTag(tags: readonly string[] | undefined, url: string, headers: IncomingHttpHeaders, unkeyed = hasUnkeyedInput(headers), authority = requestHost(headers)): readonly string[] | undefined | false {
  if (!unkeyed) return tags;
  if (tags !== undefined && tags.length >= MAX_TAGS) return false;
  return [...(tags ?? []), urlTag(url, authority)];
}

/** The key of a request whose response varies on the request headers `names`. */
export function withVary(base: string, names: readonly string[], headers: IncomingHttpHeaders): string {
  return names.length === 0 ? base : base + varyKeySuffix(names, headers);
}

/** The `Age` of a response computed at `createdAt`, at `now` (both on the cache's clock, ms since the epoch): whole seconds, never negative. */
export function ageSeconds(createdAt: number, now: number): number {
  return Math.max(0, Math.floor((now - createdAt) / 1000));
}

/**
 * Requests (raw `IncomingMessage`s, `Request`s, or argument lists outside HTTP) already
 * handled: the first guard or interceptor that claims a request handles it, the others let it
 * through. The claim is a hidden property on the request object. A `shared` claim is seen by
 * every copy of dogpile-guard loaded in the process (its mark is in the global symbol registry).
 */
export class RequestClaims {
  /** The mark this kind of claim leaves on a request. */
  private readonly mark: symbol;

  constructor(name: string, shared = false) {
    this.mark = shared ? Symbol.for(`dogpile-guard.${name}`) : Symbol(`dogpile-guard.${name}`);
  }

  has(marker: object): boolean {
    // The mark is always the request's own property: looking at its own properties alone spares
    // the walk up a prototype chain (an Express request's is six objects long, its shape new at
    // every request) that a read of a mark it lacks makes.
    return Object.hasOwn(marker, this.mark);
  }

  claim(marker: object): void {
    // A plain assignment: `defineProperty` costs a hit several times more on some request objects.
    if (Object.isExtensible(marker)) (marker as Record<symbol, unknown>)[this.mark] = true;
  }
}
