import { fieldLines, singletonField, type HeaderBag } from './header-bag.js';
import { parseEntityTag, strongMatch } from './conditional.js';
import { parseHttpDate } from './http-date.js';

/**
 * What a `Range` header asks of a representation of `size` bytes (RFC 9110 §14.1.2, §14.2):
 * - `ignore`: no `Range`, another unit than `bytes`, a syntax error (`bytes=5-2`, `bytes=a-`)
 *   or more than one range. RFC 9110 §14.2 lets a server ignore `Range`; this cache answers
 *   several ranges with the full 200 rather than build a `multipart/byteranges` body.
 * - `unsatisfiable`: one range that starts at or after `size` (or `bytes=-0`): a 416 with
 *   `Content-Range: bytes *\/size` (§15.5.17).
 * - `partial`: bytes `start` to `end` inclusive; a last position past the end is clamped, a
 *   suffix longer than the representation takes all of it (§14.1.2).
 */
type RangeRequest =
  | { kind: 'ignore'; reason: string }
  | { kind: 'unsatisfiable' }
  | { kind: 'partial'; start: number; end: number };

/** Parse one `Range` value against a representation of `size` bytes. */
export function parseSingleRange(rangeHeader: string | undefined, size: number): RangeRequest {
  if (rangeHeader === undefined) return { kind: 'ignore', reason: 'no range' };
  const m = /^\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)=(.*)$/.exec(rangeHeader);
  if (!m) return { kind: 'ignore', reason: 'malformed' };
  if (m[1]!.toLowerCase() !== 'bytes') return { kind: 'ignore', reason: 'unit' };
  const specs = m[2]!
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (specs.length === 0) return { kind: 'ignore', reason: 'malformed' };
  const parsed = specs.map(parseSpec);
  if (parsed.some((p) => p === undefined)) return { kind: 'ignore', reason: 'malformed' };
  if (parsed.length > 1) return { kind: 'ignore', reason: 'multiple ranges' };
  const spec = parsed[0]!;
  if (spec.suffix !== undefined) {
    if (spec.suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - spec.suffix), end: size - 1 };
  }
  if (spec.first >= size) return { kind: 'unsatisfiable' };
  const last = spec.last === undefined ? size - 1 : Math.min(spec.last, size - 1);
  return { kind: 'partial', start: spec.first, end: last };
}

type Spec = { first: number; last?: number; suffix?: undefined } | { suffix: number; first?: undefined; last?: undefined };

function parseSpec(spec: string): Spec | undefined {
  const m = /^(\d*)\s*-\s*(\d*)$/.exec(spec);
  if (!m) return undefined;
  const [, a, b] = m as unknown as [string, string, string];
  if (a === '' && b === '') return undefined;
  if (a === '') return { suffix: toNumber(b) };
  const first = toNumber(a);
  if (b === '') return { first };
  const last = toNumber(b);
  if (last < first) return undefined;
  return { first, last };
}

/** Digits as a number; beyond the safe range, Infinity (compares as "larger than any size"). */
function toNumber(digits: string): number {
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : Infinity;
}

/**
 * Does `If-Range` let the `Range` apply (RFC 9110 §13.1.5)? Absent: yes. An entity-tag: only
 * when it strongly matches the stored `ETag` (a weak tag never does). An HTTP-date: only when
 * it equals the stored `Last-Modified` exactly. Anything else: no (the full response is sent).
 */
export function ifRangeAllows(requestHeaders: HeaderBag, storedHeaders: HeaderBag): boolean {
  const lines = fieldLines(requestHeaders, 'if-range');
  if (lines.length === 0) return true;
  if (lines.length > 1) return false;
  const value = lines[0]!.trim();
  const tag = parseEntityTag(value);
  if (tag) {
    const stored = singletonField(storedHeaders, 'etag').value;
    const storedTag = stored === undefined ? undefined : parseEntityTag(stored);
    return storedTag !== undefined && strongMatch(tag, storedTag);
  }
  const date = parseHttpDate(value);
  if (date === undefined) return false;
  return parseHttpDate(singletonField(storedHeaders, 'last-modified').value) === date;
}

/** What to send for a GET of a stored full 200 of `size` bytes. */
type RangeAnswer =
  | { status: 200 }
  | { status: 206; start: number; end: number; headers: { 'content-range': string; 'content-length': string } }
  | { status: 416; headers: { 'content-range': string } };

/**
 * Answer a request's `Range` from a stored full 200 of `size` bytes: 206 with
 * `Content-Range: bytes a-b/size` and the slice `[start, end]` (inclusive), 416 with
 * `Content-Range: bytes *\/size`, or the full 200 (no or ignored `Range`, a method other than
 * GET, §14.2, or an `If-Range` that does not match). `start`/`end` index the stored body.
 */
export function answerRange(method: string, requestHeaders: HeaderBag, storedHeaders: HeaderBag, size: number): RangeAnswer {
  if (method !== 'GET') return { status: 200 };
  const lines = fieldLines(requestHeaders, 'range');
  if (lines.length !== 1) return { status: 200 };
  const range = parseSingleRange(lines[0], size);
  if (range.kind === 'ignore') return { status: 200 };
  if (!ifRangeAllows(requestHeaders, storedHeaders)) return { status: 200 };
  if (range.kind === 'unsatisfiable') return { status: 416, headers: { 'content-range': `bytes */${size}` } };
  return {
    status: 206,
    start: range.start,
    end: range.end,
    headers: { 'content-range': `bytes ${range.start}-${range.end}/${size}`, 'content-length': String(range.end - range.start + 1) },
  };
}
