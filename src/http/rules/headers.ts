import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { CONNECTION_FIELDS } from './header-bag.js';
import { isTargetedField } from './targeted-fields.js';

/** A header as it is stored and served: lower-case name, value(s) as latin1 strings. */
export type HeaderEntry = [name: string, value: string | string[]];

/**
 * Never stored: hop-by-hop headers (RFC 9110 §7.6.1), `Set-Cookie` (a response carrying it is
 * not stored at all; this is the second line of defence), `Content-Length` (the stored body's
 * is sent), what the cache itself sets (`X-Cache`, `Age`, `Cache-Status`),
 * `Dogpile-Cache-Control`, `Dogpile-Tags` and any other `Dogpile-*` field (read by this cache only,
 * never stored nor sent). `Date` is stored:
 * a response served from the cache carries the origin's `Date` (RFC 9110 §6.6.1).
 */
const NOT_STORED = new Set([
  ...CONNECTION_FIELDS,
  'x-cache',
  'age',
  'cache-status',
  'dogpile-cache-control',
  'dogpile-tags',
]);

/** One header's value as a single string (repeated values joined with `, `), or undefined. */
export function headerValue(headers: IncomingHttpHeaders | OutgoingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v.join(', ');
  return String(v);
}

/** The response headers to store, in the order they were set. */
export function storableHeaders(headers: OutgoingHttpHeaders, omit: readonly string[] = []): HeaderEntry[] {
  const named = headerValue(headers, 'connection');
  const alsoDropped = named ? new Set(named.split(',').map((s) => s.trim().toLowerCase())) : undefined;
  const out: HeaderEntry[] = [];
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (NOT_STORED.has(lower) || isTargetedField(lower) || alsoDropped?.has(lower) || omit.includes(lower)) continue;
    const v = headers[name];
    if (v === undefined) continue;
    out.push([lower, Array.isArray(v) ? v.map(String) : String(v)]);
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
