import type { IncomingHttpHeaders } from 'node:http';
import { defaultCacheKey, requestHost, urlTag, withoutUnkeyedInput } from './cache-key.js';
import { singletonField, type HeaderBag } from './header-bag.js';

/** Safe methods (RFC 9110 §9.2.1); every other method, known or not, is unsafe. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** True for a method whose successful response invalidates stored responses (RFC 9111 §4.4): any but a safe one, as written (methods are case-sensitive). */
export function isUnsafe(method: string): boolean {
  return !SAFE_METHODS.has(method);
}

/**
 * The URLs (path with query, no fragment) whose stored GET entries a response to an unsafe
 * request invalidates (RFC 9111 §4.4): nothing unless the method is unsafe and the status is
 * 2xx or 3xx (a "non-error status code"); then the request URL, and the URLs of `Location` and
 * `Content-Location` when they are on the request's host (absolute URLs are compared by host,
 * case-insensitive and default port removed; relative ones are resolved against the request
 * URL). The request URL is returned as received (the form the cache key is built from); the
 * others as the WHATWG URL parser normalizes them. Deduplicated, request URL first.
 */
export function invalidationTargets(method: string, status: number, requestUrl: string, host: string, responseHeaders: HeaderBag): string[] {
  if (SAFE_METHODS.has(method.toUpperCase())) return [];
  if (!(status >= 200 && status <= 399)) return [];
  const base = baseUrl(requestUrl, host);
  const targets: string[] = [];
  const add = (url: string) => {
    if (!targets.includes(url)) targets.push(url);
  };
  // The request URL as the cache key saw it (raw origin-form); an absolute form is reduced to
  // its path, and one naming another host invalidates nothing here.
  if (requestUrl.startsWith('/')) add(stripFragment(requestUrl));
  else if (base) add(base.pathname + base.search);
  if (!base) return targets;
  for (const field of ['location', 'content-location']) {
    const value = singletonField(responseHeaders, field).value;
    if (!value) continue;
    let url: URL;
    try {
      url = new URL(value, base);
    } catch {
      continue;
    }
    if ((url.protocol === 'http:' || url.protocol === 'https:') && url.host === base.host) add(url.pathname + url.search);
  }
  return targets;
}

/**
 * What a write drops for its target URLs under the default keys, whatever forwarding headers
 * it carried: each URL's key (it holds the response or the `VaryRecord`: deleting it orphans
 * every variant) as a request without forwarding headers has it and as the write's own headers
 * make it, and each URL's tag, which the responses stored for requests with other forwarding
 * headers carry (`withUrlTag`).
 */
export function defaultKeyInvalidation(targets: readonly string[], headers: IncomingHttpHeaders, authority = requestHost(headers)): { keys: string[]; tags: string[] } {
  const plain = withoutUnkeyedInput(headers);
  const keys = new Set<string>();
  for (const url of targets) keys.add(defaultCacheKey('GET', url, plain, false, authority)).add(defaultCacheKey('GET', url, headers, undefined, authority));
  return { keys: [...keys], tags: targets.map((url) => urlTag(url, authority)) };
}

function baseUrl(requestUrl: string, host: string): URL | undefined {
  try {
    const origin = new URL(`http://${host}`);
    if (origin.pathname !== '/' || origin.search || origin.username || origin.password) return undefined;
    // An absolute-form request target (`GET http://host/path`) is resolved as is.
    const url = new URL(requestUrl, origin);
    return url.host === origin.host ? url : undefined;
  } catch {
    return undefined;
  }
}

function stripFragment(url: string): string {
  const i = url.indexOf('#');
  return i === -1 ? url : url.slice(0, i);
}
