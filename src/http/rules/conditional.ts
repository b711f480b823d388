import { CONNECTION_FIELDS, fieldLines, fieldValue, singletonField, type HeaderBag } from './header-bag.js';
import { parseHttpDate } from './http-date.js';

/** An entity-tag split into its weakness and opaque part; undefined when malformed. */
interface EntityTag {
  weak: boolean;
  opaque: string;
}

/** Parse one entity-tag (RFC 9110 §8.8.3): `"xyz"` or `W/"xyz"`. */
export function parseEntityTag(value: string): EntityTag | undefined {
  const m = /^(W\/)?("[\x21\x23-\x7e\x80-\xff]*")$/.exec(value.trim());
  return m ? { weak: m[1] !== undefined, opaque: m[2]! } : undefined;
}

/**
 * The members of an `If-None-Match` / `If-Match` list: `'*'`, or the entity-tags (a comma inside
 * an opaque tag does not split it; malformed members are dropped).
 */
export function parseEntityTagList(lines: readonly string[]): '*' | EntityTag[] {
  const out: EntityTag[] = [];
  for (const line of lines) {
    if (line.trim() === '*') return '*';
    for (const m of line.matchAll(/(?:W\/)?"[^"]*"/g)) {
      const tag = parseEntityTag(m[0]);
      if (tag) out.push(tag);
    }
  }
  return out;
}

/** Weak comparison (RFC 9110 §8.8.3.2): the opaque parts are equal, weakness ignored. */
function weakMatch(a: EntityTag, b: EntityTag): boolean {
  return a.opaque === b.opaque;
}

/** Strong comparison: both strong and equal. */
export function strongMatch(a: EntityTag, b: EntityTag): boolean {
  return !a.weak && !b.weak && a.opaque === b.opaque;
}

interface ConditionalOptions {
  /** The request method; conditions are only evaluated for GET and HEAD (anything else: `'full'`). */
  method?: string;
  /** The stored response's status; a 304 only stands for a 2xx (RFC 9110 §13.2.1). */
  status?: number;
  /** When the stored response was received (ms), the last fallback of RFC 9111 §4.3.2. */
  receivedAt?: number;
}

/**
 * How a cache answers a conditional GET/HEAD from a stored response (RFC 9111 §4.3.2, RFC
 * 9110 §13.1.2, §13.1.3, §13.2.2):
 * - `If-None-Match` present: `'304'` when it is `*` or lists a tag that weakly matches the
 *   stored `ETag`; `If-Modified-Since` is then ignored, whatever the result.
 * - Otherwise `If-Modified-Since`, when it is one valid HTTP-date: `'304'` when the stored
 *   `Last-Modified` (else the stored `Date`, else `receivedAt`) is not later than it.
 * - Anything else: `'full'`.
 */
export function evaluateConditional(requestHeaders: HeaderBag, storedHeaders: HeaderBag, options: ConditionalOptions = {}): '304' | 'full' {
  if (options.method !== undefined && options.method !== 'GET' && options.method !== 'HEAD') return 'full';
  if (options.status !== undefined && (options.status < 200 || options.status > 299)) return 'full';
  const inm = fieldLines(requestHeaders, 'if-none-match');
  if (inm.length > 0) {
    const wanted = parseEntityTagList(inm);
    if (wanted === '*') return '304';
    const etag = storedETag(storedHeaders);
    if (!etag) return 'full';
    return wanted.some((t) => weakMatch(t, etag)) ? '304' : 'full';
  }
  const ims = fieldLines(requestHeaders, 'if-modified-since');
  if (ims.length !== 1) return 'full';
  const since = parseHttpDate(ims[0]);
  if (since === undefined) return 'full';
  const modified =
    parseHttpDate(singletonField(storedHeaders, 'last-modified').value) ??
    parseHttpDate(singletonField(storedHeaders, 'date').value) ??
    options.receivedAt;
  if (modified === undefined) return 'full';
  return modified <= since ? '304' : 'full';
}

function storedETag(headers: HeaderBag): EntityTag | undefined {
  const v = singletonField(headers, 'etag').value;
  return v === undefined ? undefined : parseEntityTag(v);
}

/**
 * The header fields a 304 carries, taken from the stored response (RFC 9110 §15.4.5): those of
 * `Content-Location`, `Date`, `ETag`, `Vary`, `Cache-Control`, `Expires` that it has, and
 * `Last-Modified` when it has no `ETag` (it then guides the client's cache). The cache adds its
 * own `Age` and `Cache-Status`. Names lower-case.
 */
export function notModifiedHeaders(storedHeaders: HeaderBag): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const names = ['cache-control', 'content-location', 'date', 'etag', 'expires', 'vary'];
  if (fieldValue(storedHeaders, 'etag') === undefined) names.push('last-modified');
  for (const name of names) {
    const lines = fieldLines(storedHeaders, name);
    if (lines.length === 1) out[name] = lines[0]!;
    else if (lines.length > 1) out[name] = lines;
  }
  return out;
}

/**
 * The conditional headers to send to the handler when revalidating a stored response (RFC 9111
 * §4.3.1): `If-None-Match` with its `ETag` and `If-Modified-Since` with its `Last-Modified`
 * (when a valid date), each when present; empty when the response has no validator.
 */
export function revalidationHeaders(storedHeaders: HeaderBag): { 'if-none-match'?: string; 'if-modified-since'?: string } {
  const out: { 'if-none-match'?: string; 'if-modified-since'?: string } = {};
  const etag = singletonField(storedHeaders, 'etag').value;
  if (etag !== undefined && parseEntityTag(etag)) out['if-none-match'] = etag;
  const lastModified = singletonField(storedHeaders, 'last-modified').value;
  if (lastModified !== undefined && parseHttpDate(lastModified) !== undefined) out['if-modified-since'] = lastModified;
  return out;
}

/**
 * Never taken from a 304 into the stored response (RFC 9111 §3.2): hop-by-hop fields and what
 * is not stored at all (§3.1), `Content-Length` (the stored body's), the fields that describe
 * the stored bytes (`Content-Encoding`, `Content-Range`: updating them would mislabel the body,
 * which §3.2 allows to keep), and what the cache sets itself (`Age`, `X-Cache`, `Cache-Status`).
 */
const NOT_UPDATED = new Set([
  ...CONNECTION_FIELDS,
  'content-encoding',
  'content-range',
  'age',
  'x-cache',
  'cache-status',
]);

/**
 * The stored response's headers renewed by a 304 (RFC 9111 §4.3.4, §3.2), or undefined when
 * the 304 does not select it: its strong `ETag` differs from the stored one, or it carries a
 * weak one that does not match, or it has a `Last-Modified` different from the stored one
 * while neither has an `ETag`. Otherwise every field of the 304 replaces the stored one of the
 * same name, except those in NOT_UPDATED and those the `Connection` header names; the others
 * are kept. Names lower-case; the stored order is kept, new fields come last. The response
 * sent to the request that triggered the revalidation is this plus the 304's own `Set-Cookie`
 * (passed on to that client only, never stored).
 */
export function mergeNotModified(storedHeaders: HeaderBag, headersOf304: HeaderBag): Record<string, string | string[]> | undefined {
  if (!selects(storedHeaders, headersOf304)) return undefined;
  const out: Record<string, string | string[]> = {};
  for (const key of Object.keys(storedHeaders)) {
    const lines = fieldLines(storedHeaders, key);
    if (lines.length > 0) out[key.toLowerCase()] = lines.length === 1 ? lines[0]! : lines;
  }
  const connection = new Set(
    fieldLines(headersOf304, 'connection').flatMap((l) => l.split(',').map((s) => s.trim().toLowerCase())),
  );
  for (const key of Object.keys(headersOf304)) {
    const name = key.toLowerCase();
    if (NOT_UPDATED.has(name) || connection.has(name)) continue;
    const lines = fieldLines(headersOf304, key);
    if (lines.length === 0) continue;
    out[name] = lines.length === 1 ? lines[0]! : lines;
  }
  return out;
}

function selects(stored: HeaderBag, fresh: HeaderBag): boolean {
  const newTag = singletonField(fresh, 'etag').value;
  const oldTag = storedETag(stored);
  if (newTag !== undefined) {
    const tag = parseEntityTag(newTag);
    if (!tag || !oldTag) return false;
    return tag.weak || oldTag.weak ? weakMatch(tag, oldTag) : strongMatch(tag, oldTag);
  }
  const newLm = parseHttpDate(singletonField(fresh, 'last-modified').value);
  if (newLm !== undefined && !oldTag) {
    const oldLm = parseHttpDate(singletonField(stored, 'last-modified').value);
    return oldLm === newLm;
  }
  return true;
}
