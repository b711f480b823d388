import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** A header as it is stored and served: lower-case name, value(s) as latin1 strings. */
export type HeaderEntry = [name: string, value: string | string[]];

/**
 * Never stored: hop-by-hop headers (RFC 9110 §7.6.1), `Set-Cookie` (a response carrying it is
 * not stored at all; this is the second line of defence), what the server regenerates on every
 * response (`Date`, `Content-Length`) and what the cache itself sets (`X-Cache`, `Age`).
 */
const NOT_STORED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'set-cookie',
  'date',
  'content-length',
  'x-cache',
  'age',
]);

/** One header's value as a single string (repeated values joined with `, `), or undefined. */
export function headerValue(headers: IncomingHttpHeaders | OutgoingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v.join(', ');
  return String(v);
}

/** The response headers to store, in the order they were set. */
export function storableHeaders(headers: OutgoingHttpHeaders): HeaderEntry[] {
  const named = headerValue(headers, 'connection');
  const alsoDropped = named ? new Set(named.split(',').map((s) => s.trim().toLowerCase())) : undefined;
  const out: HeaderEntry[] = [];
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (NOT_STORED.has(lower) || alsoDropped?.has(lower)) continue;
    const v = headers[name];
    if (v === undefined) continue;
    out.push([lower, Array.isArray(v) ? v.map(String) : String(v)]);
  }
  return out;
}

/** The directive names of a `Cache-Control` value, lower-case (`private="x"` → `private`). */
export function cacheControlDirectives(value: string | undefined): Set<string> {
  const out = new Set<string>();
  if (!value) return out;
  for (const part of value.split(',')) {
    const name = part.split('=', 1)[0]!.trim().toLowerCase();
    if (name) out.add(name);
  }
  return out;
}

/** The header names a `Vary` value lists, lower-case, sorted, deduplicated; `'*'` for `Vary: *`. */
export function parseVary(value: string | undefined): string[] | '*' {
  if (!value) return [];
  const names = new Set<string>();
  for (const part of value.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '*') return '*';
    if (name) names.add(name);
  }
  return [...names].sort();
}

/** Does an `If-None-Match` value match an `ETag` (weak comparison, RFC 9110 §13.1.2)? */
export function etagMatches(ifNoneMatch: string, etag: string): boolean {
  const trimmed = ifNoneMatch.trim();
  if (trimmed === '*') return true;
  const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);
  const wanted = opaque(etag.trim());
  return trimmed.split(',').some((tag) => opaque(tag.trim()) === wanted);
}
