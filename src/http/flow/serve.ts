import type { IncomingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import { KEY_HINTS_MAX_BYTES, keyHintSize } from '../../shared/keys.js';
import type { CacheStatus } from '../../core/cache.js';
import { appendCacheStatus, ttlSeconds, type CacheStatusEntry } from '../rules/cache-status.js';
import { answerRange } from '../rules/range.js';
import { evaluateConditional, notModifiedHeaders } from '../rules/conditional.js';
import { currentAge } from '../rules/freshness.js';
import { headerValue, type HeaderEntry } from '../rules/headers.js';
import { decodeResponse, type StoredResponse } from '../rules/response-format.js';

/**
 * The `X-Cache` header: `HIT` from the cache, `COALESCED` from another request's handler run,
 * `MISS` from this request's own, `STALE` a stored response past its TTL (staleWhileRevalidate,
 * staleIfError, softTimeout).
 */
export type XCache = 'HIT' | 'MISS' | 'COALESCED' | 'STALE';

/** What a call to the cache means for the `X-Cache` header (`pass`: the handler ran for this request). */
export function xCacheFor(status: CacheStatus): XCache {
  return status === 'hit' ? 'HIT' : status === 'coalesced' ? 'COALESCED' : status === 'stale' ? 'STALE' : 'MISS';
}

/** A stored response decoded once, with its headers ready to be written. */
export interface ServableResponse extends StoredResponse {
  /** The stored headers plus `content-length`. */
  headerObject: Record<string, string | string[]>;
  etag: string | undefined;
  /**
   * The last plain hit prepared from it (no conditional request, no range), with the `Age` and
   * `Cache-Status` ttl (whole seconds) it says: reused by the hits of the same second.
   */
  lastHit?: { age: number; ttl: number | undefined; response: PreparedResponse };
}

/** A response about to be written from the cache. */
export interface PreparedResponse {
  status: number;
  /** Shared between requests: do not modify. */
  headers: readonly HeaderEntry[];
  headerObject: Readonly<Record<string, string | string[]>>;
  xCache: XCache;
  /** The `Age`: the age the response arrived with plus whole seconds in the cache (RFC 9111 §4.2.3). */
  age: number;
  /** The `Cache-Status` value (RFC 9211): members of caches nearer the origin, then this cache's. */
  cacheStatus: string;
  /** Undefined for a 304; for HEAD the body is there (its length is the Content-Length) and Node does not send it. */
  body: Buffer | undefined;
}

/** The stored response in a cached value (decoded, its headers ready), or undefined when the value is not one. */
export function toServable(value: unknown): ServableResponse | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  let bytes: Buffer;
  if (Buffer.isBuffer(value)) bytes = value;
  else if (value instanceof Uint8Array) bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  else if ((value as { type?: unknown }).type === 'Buffer' && Array.isArray((value as { data?: unknown }).data)) {
    // A Buffer that went through a JSON serializer.
    bytes = Buffer.from((value as { data: number[] }).data);
  } else return undefined;
  let stored: StoredResponse;
  try {
    stored = decodeResponse(bytes);
  } catch {
    return undefined;
  }
  const headers: HeaderEntry[] = [...stored.headers, ['content-length', String(stored.body.length)]];
  const headerObject: Record<string, string | string[]> = {};
  for (const [name, v] of headers) headerObject[name] = v;
  const etag = headerObject.etag;
  return { ...stored, headers, headerObject, etag: typeof etag === 'string' ? etag : undefined };
}

/** Stored responses up to this many bytes are matched whole against the last one decoded under their key. */
const KEYED_BYTES_MAX = 16 * 1024;
/** How many keys' last decoded response a guard keeps, within `KEY_HINTS_MAX_BYTES` of key text and bytes together. */
const KEYED_MAX = 256;

/**
 * Stored responses decoded once. Per value object: in-process hits (and `l1` hits) hand out
 * the same Buffer each time. Per key, for the bytes a Redis hit reads anew each time: bytes
 * equal, whole, to the last response decoded under the key are that response (a rewrite, even
 * in the same millisecond, differs in its bytes: `createdAt` is one of them), so the hit reuses
 * its decoding and its prepared hit (`lastHit`). Only responses of at most 16 KiB are kept by
 * key (comparing longer ones would cost more than decoding them), for 256 keys at most and
 * within 4 MB of key text and bytes together, whatever the keys' length.
 */
export class DecodedResponses {
  private readonly byValue = new WeakMap<object, ServableResponse>();
  private readonly byKey = new LRUCache<string, { bytes: Buffer; servable: ServableResponse }>({
    max: KEYED_MAX,
    maxSize: KEY_HINTS_MAX_BYTES,
    sizeCalculation: (entry, key) => keyHintSize(key) + entry.bytes.length,
  });

  /** The response decoded before from `value` (the same object, or under `key` the same bytes), or undefined. */
  known(value: unknown, key?: string): ServableResponse | undefined {
    if (value === null || typeof value !== 'object') return undefined;
    const memo = this.byValue.get(value);
    if (memo !== undefined || !keyable(value, key)) return memo;
    const last = this.byKey.get(key!);
    return last !== undefined && last.bytes.equals(value) ? last.servable : undefined;
  }

  /** The stored response in `value` (`toServable`), decoded once per value object and, under `key`, once per bytes. */
  decode(value: unknown, key?: string): ServableResponse | undefined {
    return this.known(value, key) ?? this.decodeNew(value, key);
  }

  /** `decode` of a value `known` has just said nothing of: decoded and kept. */
  decodeNew(value: unknown, key?: string): ServableResponse | undefined {
    if (!keyable(value, key)) {
      const servable = toServable(value);
      if (servable !== undefined) this.byValue.set(value as object, servable);
      return servable;
    }
    // Kept by key: a copy, so that a larger reply the read was a view of is not held.
    const bytes = Buffer.from(value);
    const servable = toServable(bytes);
    if (servable === undefined) return undefined;
    this.byValue.set(value, servable);
    this.byKey.set(key!, { bytes, servable });
    return servable;
  }
}

/** Whether `value` is kept by `key` as well as by object: bytes short enough to compare whole. */
function keyable(value: unknown, key: string | undefined): value is Buffer {
  return key !== undefined && Buffer.isBuffer(value) && value.length <= KEYED_BYTES_MAX;
}

/** True when the request's headers match what the stored response's `Vary` recorded. */
export function varyMatches(stored: StoredResponse, headers: IncomingHttpHeaders): boolean {
  for (const [name, value] of stored.vary) {
    if (headerValue(headers, name) !== value) return false;
  }
  return true;
}

/**
 * How long (ms) `stored` is still fresh at `now` (the cache's clock, the one `createdAt` is on): negative once stale. An entry written before
 * the lifetime was recorded counts as fresh as long as the cache keeps it.
 */
export function remainingFreshness(stored: StoredResponse, now: number): number {
  if (stored.freshFor === undefined) return Number.POSITIVE_INFINITY;
  return stored.freshFor - Math.max(0, now - stored.createdAt);
}

/**
 * The response to write for a request served from `stored`: a 304 with the headers RFC 9110
 * §15.4.5 lists when the request's `If-None-Match` / `If-Modified-Since` match it (RFC 9111
 * §4.3.2), else the stored response. `member` is this cache's `Cache-Status` member.
 */
export function prepareResponse(
  stored: ServableResponse,
  requestHeaders: IncomingHttpHeaders,
  xCache: XCache,
  now: number,
  member?: string,
  method = 'GET',
): PreparedResponse {
  const age = currentAge(stored.createdAt, stored.ageOnArrival ?? 0, now);
  const cacheStatus = appendCacheStatus(stored.headerObject['cache-status'], member ?? '');
  if (evaluateConditional(requestHeaders, stored.headerObject, { method, status: stored.status, receivedAt: stored.createdAt }) === '304') {
    const headerObject = notModifiedHeaders(stored.headerObject);
    const headers = Object.entries(headerObject) as HeaderEntry[];
    return { status: 304, headers, headerObject, xCache, age, cacheStatus, body: undefined };
  }
  return { status: stored.status, headers: stored.headers, headerObject: stored.headerObject, xCache, age, cacheStatus, body: stored.body };
}

/** The request header fields of a request that asks for no validation. */
const NOT_CONDITIONAL: IncomingHttpHeaders = Object.freeze({});

/**
 * A fresh stored response served whole to a request that is not conditional: the same prepared
 * response (and so the same instructions) for every such hit while its `Age` and `Cache-Status`
 * ttl stay the same whole seconds. `remaining` is its remaining freshness (ms) at `now`;
 * `member` makes this cache's `Cache-Status` member.
 */
export function plainHit(stored: ServableResponse, remaining: number, now: number, member: (entry: CacheStatusEntry) => string): PreparedResponse {
  const age = currentAge(stored.createdAt, stored.ageOnArrival ?? 0, now);
  const finite = Number.isFinite(remaining);
  const ttl = finite ? ttlSeconds(remaining) : undefined;
  const last = stored.lastHit;
  if (last !== undefined && last.age === age && last.ttl === ttl) return last.response;
  const response = prepareResponse(stored, NOT_CONDITIONAL, 'HIT', now, member({ hit: true, ttl: finite ? remaining : undefined }));
  stored.lastHit = { age, ttl, response };
  return response;
}

/**
 * A GET with `Range` served from a stored full 200 (RFC 9110 §14): one satisfiable range as a
 * 206 with `Content-Range`, an unsatisfiable one as a 416, anything else (several ranges, an
 * `If-Range` that does not match, another status) as the full response.
 */
export function rangeOf(stored: ServableResponse, prepared: PreparedResponse, requestHeaders: IncomingHttpHeaders): PreparedResponse {
  if (stored.status !== 200) return prepared;
  const answer = answerRange('GET', requestHeaders, stored.headerObject, stored.body.length);
  if (answer.status === 200) return prepared;
  const kept = stored.headers.filter(([name]) => name !== 'content-length' && name !== 'content-range');
  if (answer.status === 416) {
    const headers: HeaderEntry[] = [...kept.filter(([name]) => !name.startsWith('content-') || name === 'content-location'), ['content-range', answer.headers['content-range']], ['content-length', '0']];
    return { status: 416, headers, headerObject: Object.fromEntries(headers), xCache: prepared.xCache, age: prepared.age, cacheStatus: prepared.cacheStatus, body: Buffer.alloc(0) };
  }
  const headers: HeaderEntry[] = [...kept, ['content-range', answer.headers['content-range']], ['content-length', answer.headers['content-length']]];
  // Built field by field: a copy of `prepared` would carry the instructions made for it.
  return { status: 206, headers, headerObject: Object.fromEntries(headers), xCache: prepared.xCache, age: prepared.age, cacheStatus: prepared.cacheStatus, body: stored.body.subarray(answer.start, answer.end + 1) };
}
