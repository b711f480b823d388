import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { isIPv6 } from 'node:net';
import { headerValue } from './headers.js';

/** Every HTTP cache key starts with this, so it cannot meet a key of a direct `getOrCompute` call. */
export const HTTP_KEY_PREFIX = 'http:';

/**
 * Request headers that can change what an app renders without being part of the URL:
 * reverse-proxy headers (`X-Forwarded-Host` makes Express's `req.hostname` and Fastify's
 * `request.host` lie when `trust proxy` is on) and method/URL overrides. The host in the key
 * always comes from the `Host` header; a request that also carries one of these gets its own
 * entry, so a forged value can never end up in the entry that requests without it (or with
 * the real value) are served.
 */
export const UNKEYED_INPUT_HEADERS = [
  'forwarded',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-original-url',
  'x-rewrite-url',
  'x-http-method-override',
  'x-method-override',
] as const;

/**
 * Sorts the parameters of a raw query string by name (the order of repeated names is kept:
 * `a=1&a=2` and `a=2&a=1` may mean different lists). Empty parameters are dropped. Names are
 * compared as sent, so the query is reordered only when no two names can decode to one: when a
 * name holds a `%` or a `+` (`%61` and `a` are one name to the app), the query is kept exactly
 * as received.
 */
export function sortQuery(query: string): string {
  if (query === '') return '';
  const parts = query.split('&');
  let sorted = true;
  let last = '';
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (p === '') {
      sorted = false;
      continue;
    }
    const name = paramName(p);
    if (ENCODED_NAME.test(name)) return query;
    if (name < last) sorted = false;
    last = name;
  }
  if (sorted) return query;
  const named: [name: string, param: string][] = [];
  for (const p of parts) if (p !== '') named.push([paramName(p), p]);
  if (named.length === 0) return '';
  // Array.prototype.sort is stable: equal names keep their order.
  named.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let out = named[0]![1];
  for (let i = 1; i < named.length; i++) out += `&${named[i]![1]}`;
  return out;
}

/** A query parameter name that may decode to another one's: it holds a percent-escape or a `+` (a space). */
const ENCODED_NAME = /[%+]/;

function paramName(param: string): string {
  const eq = param.indexOf('=');
  return eq === -1 ? param : param.slice(0, eq);
}

/** The authority a request names: its `Host` header (HTTP/2: `:authority`), or '' when it has none. */
export function requestHost(headers: IncomingHttpHeaders): string {
  return headers.host ?? headerValue(headers, ':authority') ?? '';
}

// RFC 3986 §3.2.2: reg-name = *( unreserved / pct-encoded / sub-delims ), which also covers IPv4address.
const REG_NAME = /^(?:[a-z0-9\-._~!$&'()*+,;=]|%[0-9a-f]{2})*$/i;
const IPV6_CHARS = /^[0-9a-f:.]+$/i;
const IPV_FUTURE = /^v[0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+$/i;
const PORT = /^[0-9]*$/;

/**
 * Is this a valid `Host` value (RFC 9110 §7.2): `uri-host [ ":" port ]`, where `uri-host` is
 * an IP-literal in brackets, an IPv4 address or a reg-name (RFC 3986 §3.2.2), and the port is
 * digits. Anything else (`victim.example/admin`, spaces, `@`, `?`, `#`, a second colon) is not:
 * the adapters pass such requests through uncached.
 */
export function isValidHost(host: string): boolean {
  // Most requests to a server name the same host or two: the last one found valid is remembered.
  if (host === lastValidHost) return true;
  if (!checkHost(host)) return false;
  lastValidHost = host;
  return true;
}

let lastValidHost: string | undefined;

function checkHost(host: string): boolean {
  let rest: string;
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    if (end === -1) return false;
    const literal = host.slice(1, end);
    if (!((IPV6_CHARS.test(literal) && isIPv6(literal)) || IPV_FUTURE.test(literal))) return false;
    rest = host.slice(end + 1);
  } else {
    const colon = host.indexOf(':');
    const name = colon === -1 ? host : host.slice(0, colon);
    if (!REG_NAME.test(name)) return false;
    rest = colon === -1 ? '' : host.slice(colon);
  }
  return rest === '' || (rest[0] === ':' && PORT.test(rest.slice(1)));
}

/**
 * The default key of a request: method, host (from the `Host` header, lower-case, or the
 * `authority` given: see `keyAuthority`), the path as received (never dot-resolved) and the query
 * (`sortQuery`), plus the name and value of any `UNKEYED_INPUT_HEADERS` the request carries.
 * `HEAD` uses the `GET` key: it is answered from the GET entry.
 *
 * The parts are written as a JSON array, so no part can spill into its neighbour (a `/` in
 * the host, a `?` or newline anywhere): two requests that differ in any part never share a
 * key. A default key starts with `http:[`, a user key with `http:~`, and neither contains a
 * newline, which starts the `Vary` part (`varyKeySuffix`).
 */
export function defaultCacheKey(method: string, url: string, headers: IncomingHttpHeaders, unkeyed = hasUnkeyedInput(headers), authority = requestHost(headers)): string {
  if (!unkeyed && (method === 'GET' || method === 'HEAD')) return plainGetKey(authority, url);
  return buildDefaultKey(method, url, headers, unkeyed, authority);
}

/**
 * The default GET keys of requests without unkeyed input, by URL, for the last `Host` seen
 * (most servers answer one or two): a URL asked again has its key built once. Only short URLs
 * are kept, at most `PLAIN_KEYS_MAX` of them (emptied when full): the memo holds a few hundred
 * kilobytes at most, whatever URLs clients send.
 */
const plainKeys = { host: '', keys: new Map<string, string>() };
const PLAIN_KEYS_MAX = 256;
const PLAIN_KEY_URL_MAX = 256;

function plainGetKey(host: string, url: string): string {
  if (url.length > PLAIN_KEY_URL_MAX || host.length > PLAIN_KEY_URL_MAX) return buildDefaultKey('GET', url, {}, false, host);
  if (host !== plainKeys.host) {
    plainKeys.host = host;
    plainKeys.keys.clear();
  }
  let key = plainKeys.keys.get(url);
  if (key !== undefined) return key;
  key = buildDefaultKey('GET', url, {}, false, host);
  if (plainKeys.keys.size >= PLAIN_KEYS_MAX) plainKeys.keys.clear();
  plainKeys.keys.set(url, key);
  return key;
}

function buildDefaultKey(method: string, url: string, headers: IncomingHttpHeaders, unkeyed: boolean, rawHost = requestHost(headers)): string {
  const host = rawHost.toLowerCase();
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : sortQuery(url.slice(q + 1));
  const verb = method === 'HEAD' ? 'GET' : method;
  if (!unkeyed) {
    // What JSON.stringify writes for these four strings, without building the array.
    return `${HTTP_KEY_PREFIX}[${jsonString(verb)},${jsonString(host)},${jsonString(path)},${jsonString(query)}]`;
  }
  const parts: (string | [string, string])[] = [verb, host, path, query];
  for (const name of UNKEYED_INPUT_HEADERS) {
    const v = headers[name];
    if (v !== undefined) parts.push([name, Array.isArray(v) ? v.join(', ') : v]);
  }
  return HTTP_KEY_PREFIX + JSON.stringify(parts);
}

/** Characters JSON.stringify writes escaped: `"`, `\`, control characters, and surrogates (a lone one is escaped). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON.stringify escapes
const JSON_ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** `JSON.stringify(text)`, quoting directly when nothing in it needs an escape. */
function jsonString(text: string): string {
  return JSON_ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** True when a request carries one of `UNKEYED_INPUT_HEADERS` (its default key then has them in it). */
export function hasUnkeyedInput(headers: IncomingHttpHeaders): boolean {
  for (const name of UNKEYED_INPUT_HEADERS) if (headers[name] !== undefined) return true;
  return false;
}

/** `headers` without `UNKEYED_INPUT_HEADERS`: what the default key of the same URL is built from for a request that carries none. */
export function withoutUnkeyedInput(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = { ...headers };
  for (const name of UNKEYED_INPUT_HEADERS) delete out[name];
  return out;
}

/**
 * The tag every stored response of a URL carries when its request had `UNKEYED_INPUT_HEADERS`
 * (whose values put it under a key of its own): host (from `Host`, lower-case), path and sorted
 * query, hashed to a fixed length. A write to the URL invalidates the tag, and with it the
 * responses stored for every value of those headers, whichever the write itself carried.
 */
export function urlTag(url: string, host: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : sortQuery(url.slice(q + 1));
  return `${HTTP_KEY_PREFIX}url:${createHash('sha256').update(JSON.stringify([host.toLowerCase(), path, query])).digest('base64url')}`;
}

/** Escapes `\\` and newlines, so the result has no newline and different inputs stay different. */
export function escapeKey(key: string): string {
  return key.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** A key returned by the user's `key(req)`, namespaced apart from the default ones (and escaped: see `defaultCacheKey`). */
export function userCacheKey(key: string): string {
  return `${HTTP_KEY_PREFIX}~${escapeKey(key)}`;
}

/** What the request headers named by a response's `Vary` add to the key: a newline, then their names and values as JSON. */
export function varyKeySuffix(names: readonly string[], headers: IncomingHttpHeaders): string {
  return `\n${JSON.stringify(names.map((name) => [name, headerValue(headers, name) ?? null]))}`;
}
