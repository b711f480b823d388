import type { StoreDecision } from '../../core/cache.js';
import type { FreshnessRules } from '../../core/freshness.js';
import { mergeTags } from '../../shared/tag-names.js';
import { fieldTags } from './targeted-fields.js';
import { mergeNotModified, revalidationHeaders } from './conditional.js';
import type { CapturedResponse } from '../flow/capture.js';
import { ownStaleIfError, responseFreshness, routeWindow, storeDecisionOf, type Freshness } from './freshness.js';
import { headerValue, parseVary, storableHeaders, type HeaderEntry } from './headers.js';
import { formatHttpDate } from './http-date.js';

import type { ServableResponse } from '../flow/serve.js';
import type { CachePlan, LeaderRun } from '../flow/plan-types.js';

/*
 * What the cache stores of a leader's response, and for how long (RFC 9111 §3, §4.2, §4.3.4;
 * RFC 9213): pure functions of the run, the response and the rules below. The writes
 * themselves are the guard's (`ResponseWrites`).
 */

/** What the storage rules read of the guard's options and of its cache's, at the time of a decision. */
export interface StoreRules {
  readonly maxTtl: number;
  readonly maxBodySize: number;
  /** Statuses that may be stored on the plan's ttl. */
  readonly statuses: ReadonlySet<number>;
  /** The cache's stale windows (a route's own come with its plan). */
  readonly cacheFreshness: FreshnessRules;
}

export type StorableFreshness = Extract<Freshness, { storable: true }>;

/** A stored response's fields but its `createdAt` (the cache's clock, read when it is written). */
export interface StoredFields {
  readonly status: number;
  readonly headers: HeaderEntry[];
  readonly vary: ReadonlyArray<readonly [string, string | undefined]>;
  readonly body: Buffer | readonly Buffer[];
  readonly freshFor: number;
  readonly ageOnArrival: number;
  readonly staleIfError: number | undefined;
}

/**
 * What a response's headers say to this cache, for the run's request (RFC 9111 §3, §4.2;
 * RFC 9213): whether it may be stored and for how long. `now` is this machine's wall clock,
 * as the HTTP dates it is compared with (`Date`, `Expires`, RFC 9111 §4.2.3); the lifetime it
 * yields is counted from the entry's `createdAt`, on the cache's clock. The handler's
 * `Dogpile-Cache-Control`, taken off its response (`run.targeted`), counts as one of its fields.
 */
export function freshnessFor(run: LeaderRun, status: number, headers: CapturedResponse['headers'], rules: StoreRules, now: number): Freshness {
  const bag = run.targeted !== undefined && headers['dogpile-cache-control'] === undefined ? { ...headers, 'dogpile-cache-control': run.targeted } : headers;
  return responseFreshness(status, bag, { now, defaultTtl: run.plan.ttl, maxTtl: rules.maxTtl, statuses: rules.statuses });
}

/**
 * The freshness of a response the capture may store, or undefined: not storable, stale at
 * once without a validator to revalidate it with (shared with nobody), a body over
 * `maxBodySize` (`bodySize`, else a valid `Content-Length`), or tags no invalidation could reach.
 */
export function storableFreshness(run: LeaderRun, status: number, headers: CapturedResponse['headers'], rules: StoreRules, now: number, bodySize?: number): StorableFreshness | undefined {
  const f = freshnessFor(run, status, headers, rules, now);
  if (!f.storable || (f.ttl < 1 && !hasValidator(headers))) return undefined;
  const length = bodySize ?? contentLength(headers);
  if (length !== undefined && length > rules.maxBodySize) return undefined;
  if (responseTags(run) === false) return undefined;
  return f;
}

/**
 * The tags the leader's `Dogpile-Tags` gives its entry (comma-separated, trimmed, empty
 * members dropped), or false when they are not valid tags, or too many with the request's
 * (the response is then shared with nobody: stored untagged, no invalidation could reach it).
 */
export function responseTags(run: LeaderRun): readonly string[] | false {
  return fieldTags(run.tagged, run.plan.tags);
}

/** Every tag of the leader's entry (the request's and its response's), for a write outside the miss protocol. */
export function entryTags(run: LeaderRun): readonly string[] | undefined {
  const own = responseTags(run);
  return mergeTags(run.plan.tags, own === false ? undefined : own, 'Dogpile-Tags');
}

/**
 * The stored response renewed by the handler's 304 to a revalidation (RFC 9111 §4.3.4): its
 * merged headers (with a new `Date`) and their freshness, or undefined when the 304 does not
 * select it or the merged response may not be stored.
 */
export function renewal(
  run: LeaderRun,
  stored: ServableResponse,
  headersOf304: CapturedResponse['headers'],
  rules: StoreRules,
  now: number,
): { merged: Record<string, string | string[]>; f: StorableFreshness } | undefined {
  const merged = mergeNotModified(stored.headerObject, headersOf304);
  if (merged === undefined || responseTags(run) === false) return undefined;
  merged.date = formatHttpDate(now);
  const f = freshnessFor(run, stored.status, merged, rules, now);
  return f.storable ? { merged, f } : undefined;
}

/**
 * How long the store keeps a response. One with a validator (`ETag`, `Last-Modified`) is kept
 * past its lifetime, for revalidation, unless a stale window keeps it anyway (its own
 * `stale-while-revalidate` / `stale-if-error`, else the route's and the cache's: then a stale
 * copy is served while the refresh runs the handler conditionally): once stale, the next request runs the
 * handler with `If-None-Match` / `If-Modified-Since` and a 304 renews it (RFC 9111 §4.3).
 * It is kept for the adapter's ttl (else a minute, within maxTtl) after its lifetime.
 */
export function storageTtl(plan: CachePlan, f: StorableFreshness, headers: CapturedResponse['headers'], rules: StoreRules): number {
  const forRevalidation = Math.max(1, Math.min(rules.maxTtl, plan.ttl > 0 ? plan.ttl : 60_000));
  if (f.ttl < 1) return forRevalidation;
  if (!hasValidator(headers) || keptStale(plan, f, rules)) return f.ttl;
  return f.ttl + forRevalidation;
}

/** Whether the store keeps this response stale past its lifetime anyway (a stale window applies to it). */
export function keptStale(plan: CachePlan, f: StorableFreshness, rules: StoreRules): boolean {
  if (f.mustRevalidate) return false;
  const window = (own: number | undefined, name: 'staleWhileRevalidate' | 'staleIfError'): number => own ?? routeWindow(plan.freshness, rules.cacheFreshness, name);
  return window(f.staleWhileRevalidate, 'staleWhileRevalidate') > 0 || window(f.staleIfError, 'staleIfError') > 0;
}

/** The verdict that stores a response for `storeFor` ms, with the tags of its own `Dogpile-Tags`. */
function decisionFor(run: LeaderRun, f: StorableFreshness, storeFor: number): StoreDecision {
  const decision = storeDecisionOf(f, storeFor);
  const own = responseTags(run);
  if (own !== false && own.length > 0) decision.tags = [...own];
  return decision;
}

/** What the store does with a leader's complete response (`responseVerdict`). */
export type ResponseVerdict =
  /** Shared with nobody: too big, not storable, or stale at once without a validator; `refused` when its headers say so (not its size). */
  | { readonly store: false; readonly refused: boolean }
  | {
      readonly store: true;
      /** The stored response, but for its `createdAt`. */
      readonly fields: StoredFields;
      readonly decision: StoreDecision;
      /** How long the store keeps it (`storageTtl`). */
      readonly storeFor: number;
      /** The request fields its `Vary` names. */
      readonly vary: readonly string[];
    };

/**
 * The leader's response is complete: whether and how it is stored. Not storable, or stale at
 * once (max-age=0, a past Expires, no-cache) without a validator to revalidate it with, or
 * `Vary: *`: shared with nobody. Node writes a `Date` on every response the app did not give
 * one: the one sent is `now`'s.
 */
export function responseVerdict(run: LeaderRun, response: CapturedResponse, rules: StoreRules, now: number): ResponseVerdict {
  if (response.tooBig) return { store: false, refused: false };
  const f = storableFreshness(run, response.status, response.headers, rules, now);
  const vary = parseVary(headerValue(response.headers, 'vary'));
  if (f === undefined || vary === '*') return { store: false, refused: true };
  const headers = storableHeaders(response.headers, f.omitHeaders);
  if (!headers.some(([name]) => name === 'date')) headers.push(['date', formatHttpDate(now)]);
  const fields: StoredFields = {
    status: response.status,
    headers,
    vary: vary.map((name) => [name, headerValue(run.plan.headers, name)] as const),
    body: response.body,
    freshFor: f.ttl,
    ageOnArrival: f.initialAge,
    staleIfError: ownStaleIfError(f),
  };
  const storeFor = storageTtl(run.plan, f, response.headers, rules);
  return { store: true, fields, decision: decisionFor(run, f, storeFor), storeFor, vary };
}

/**
 * The stored response renewed by a 304 (RFC 9111 §4.3.4): its fields but `createdAt`, with the
 * verdict that stores it, or undefined when the 304 does not renew it.
 */
export function renewedVerdict(run: LeaderRun, stored: ServableResponse, headersOf304: CapturedResponse['headers'], rules: StoreRules, now: number): { fields: StoredFields; decision: StoreDecision } | undefined {
  const renewed = renewal(run, stored, headersOf304, rules, now);
  if (renewed === undefined) return undefined;
  const { merged, f } = renewed;
  const fields: StoredFields = {
    status: stored.status,
    headers: storableHeaders(merged, f.omitHeaders),
    vary: stored.vary,
    body: stored.body,
    freshFor: f.ttl,
    ageOnArrival: f.initialAge,
    staleIfError: ownStaleIfError(f),
  };
  return { fields, decision: decisionFor(run, f, storageTtl(run.plan, f, merged, rules)) };
}

/** A valid `Content-Length` (digits only, one value), or undefined. */
function contentLength(headers: CapturedResponse['headers']): number | undefined {
  const value = headers['content-length'];
  const text = Array.isArray(value) ? (value.length === 1 ? String(value[0]) : undefined) : value === undefined ? undefined : String(value);
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}

/** Whether a response carries a validator (`ETag`, `Last-Modified`) to revalidate it with. */
export function hasValidator(headers: CapturedResponse['headers']): boolean {
  return Object.keys(revalidationHeaders(headers)).length > 0;
}

/** Whether two `Vary` name lists (sorted, lower-case) are the same. */
export function sameNames(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((name, i) => name === b[i]);
}
