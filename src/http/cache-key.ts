import type { IncomingHttpHeaders } from 'node:http';
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
 * compared as sent, without percent-decoding.
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

function paramName(param: string): string {
  const eq = param.indexOf('=');
  return eq === -1 ? param : param.slice(0, eq);
}

/**
 * The default key of a request: method, host (from the `Host` header, lower-case), path and
 * sorted query, plus the values of any `UNKEYED_INPUT_HEADERS` the request carries. `HEAD`
 * uses the `GET` key: it is answered from the GET entry.
 */
export function defaultCacheKey(method: string, url: string, headers: IncomingHttpHeaders): string {
  const host = (headers.host ?? headerValue(headers, ':authority') ?? '').toLowerCase();
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : sortQuery(url.slice(q + 1));
  let key = `${HTTP_KEY_PREFIX}${method === 'HEAD' ? 'GET' : method} ${host}${path}${query === '' ? '' : `?${query}`}`;
  for (const name of UNKEYED_INPUT_HEADERS) {
    const v = headers[name];
    if (v !== undefined) key += `\n${name}: ${Array.isArray(v) ? v.join(', ') : v}`;
  }
  return key;
}

/** A key returned by the user's `key(req)`, namespaced like the default ones. */
export function userCacheKey(key: string): string {
  return `${HTTP_KEY_PREFIX}~${key}`;
}

/** What the request headers named by a response's `Vary` add to the key. */
export function varyKeySuffix(names: readonly string[], headers: IncomingHttpHeaders): string {
  let suffix = '';
  for (const name of names) {
    const v = headerValue(headers, name);
    suffix += v === undefined ? `\nvary ${name}` : `\nvary ${name}: ${v}`;
  }
  return suffix;
}
