import type { DogpileCache } from '../core/cache.js';
import { getDefaultCache } from '../core/default-cache.js';
import { mergeTags } from '../shared/tag-names.js';
import { fieldTags } from './targeted-fields.js';
import { formatCacheStatus, type CacheStatusEntry } from './cache-status.js';
import { mergeNotModified, revalidationHeaders } from './conditional.js';
import { type CapturedResponse, type SharedResponse } from './capture.js';
import { responseFreshness, storeDecisionOf, type Freshness } from './freshness.js';
import { headerValue, parseVary, storableHeaders } from './headers.js';
import { formatHttpDate } from './http-date.js';
import { resolveHttpCacheOptions, type HttpCacheOptions, type ResolvedHttpCacheOptions } from './options.js';
import { storeComputed, storeOptions, type StoreOptions } from './cache-calls.js';
import { encodeVaryRecord, newGeneration, toVaryRecord, variantKey, type VaryRecord } from './vary-record.js';
import { encodeResponse } from './response-format.js';
import { ORIGIN_ERROR_STATUSES, ownStaleIfError, routeWindow } from './stale-on-error.js';
import { type ServableResponse } from './serve.js';
import type { CachePlan } from './plan-types.js';

/**
 * What the guard stores and how: a captured response's verdict and bytes, a revalidation's
 * renewal, `Vary` records and variants, and the lifetime the store keeps each response for.
 */
export abstract class ResponseStore<Req> {
  readonly options: ResolvedHttpCacheOptions<Req>;
  /** Stored responses decoded once per value object (in-process hits hand out the same Buffer). */
  protected readonly decoded = new WeakMap<object, ServableResponse>();
  /**
   * The `VaryRecord`s this process is writing (a URL's key → its record), until the write has
   * landed: a request for another variant of the URL that arrives meanwhile finds no record in
   * the store yet, and takes this one's generation instead of making one that would orphan the
   * variant being stored.
   */
  protected readonly writingRecords = new Map<string, VaryRecord>();
  /** Keys whose refresh here was answered with a response that may not be stored: until it settles, their stale copy is nobody's answer (RFC 5861 §3). */
  protected readonly refusedRefreshes = new Set<string>();

  constructor(options?: HttpCacheOptions<Req>, resolveOptions?: { extra?: readonly string[] }) {
    this.options = resolveHttpCacheOptions(options, resolveOptions);
  }

  /** The cache in use: the one given, or the default cache at the time of the call. */
  get cache(): DogpileCache {
    const cache = this.options.cache ?? getDefaultCache();
    return this.options.namespace === undefined ? cache : cache.namespace(this.options.namespace);
  }

  /** This cache's `Cache-Status` member for an entry. */
  member(entry: CacheStatusEntry): string {
    return formatCacheStatus(entry, this.options.cacheStatusName);
  }

  /**
   * What a response's headers say to this cache, for the request `plan` (RFC 9111 §3, §4.2;
   * RFC 9213): whether it may be stored and for how long. `now` is this machine's wall clock,
   * as the HTTP dates it is compared with (`Date`, `Expires`, RFC 9111 §4.2.3); the lifetime it
   * yields is counted from the entry's `createdAt`, on the cache's clock.
   */
  freshness(plan: CachePlan, status: number, headers: CapturedResponse['headers'], now = Date.now()): Freshness {
    const bag = plan.targeted !== undefined && headers['dogpile-cache-control'] === undefined ? { ...headers, 'dogpile-cache-control': plan.targeted } : headers;
    return responseFreshness(status, bag, { now, defaultTtl: plan.ttl, maxTtl: this.options.maxTtl, statuses: this.options.statuses });
  }

  /**
   * The freshness of a response the capture may store, or undefined: not storable, stale at
   * once without a validator to revalidate it with (shared with nobody), or a body over
   * `maxBodySize` (`bodySize`, else a valid `Content-Length`).
   */
  protected storable(plan: CachePlan, status: number, headers: CapturedResponse['headers'], bodySize?: number, now = Date.now()): StorableFreshness | undefined {
    const f = this.freshness(plan, status, headers, now);
    if (!f.storable || (f.ttl < 1 && !hasValidator(headers))) return undefined;
    const length = bodySize ?? contentLength(headers);
    if (length !== undefined && length > this.options.maxBodySize) return undefined;
    if (this.responseTags(plan) === false) return undefined;
    return f;
  }

  /**
   * The tags the leader's `Dogpile-Tags` gives its entry (comma-separated, trimmed, empty
   * members dropped), or false when they are not valid tags, or too many with the request's
   * (the response is then shared with nobody: stored untagged, no invalidation could reach it).
   */
  protected responseTags(plan: CachePlan): readonly string[] | false {
    return fieldTags(plan.tagged, plan.tags);
  }

  /** Every tag of the leader's entry (the request's and its response's), for a write outside the miss protocol. */
  protected entryTags(plan: CachePlan): readonly string[] | undefined {
    const own = this.responseTags(plan);
    return mergeTags(plan.tags, own === false ? undefined : own, 'Dogpile-Tags');
  }

  /** `cache.set` options, at the moment of the write, for a response written outside the miss protocol (see `storeOptions`). */
  protected setOptions(plan: CachePlan, ttl: number, startedAt: number): StoreOptions {
    return storeOptions(ttl, this.entryTags(plan), startedAt);
  }

  /**
   * The stored response renewed by the handler's 304 to a revalidation (RFC 9111 §4.3.4): its
   * merged headers (with a new `Date`) and their freshness, or undefined when the 304 does not
   * select it or the merged response may not be stored.
   */
  protected renewal(plan: CachePlan, stored: ServableResponse, headersOf304: CapturedResponse['headers'], now = Date.now()): { merged: Record<string, string | string[]>; f: StorableFreshness } | undefined {
    const merged = mergeNotModified(stored.headerObject, headersOf304);
    if (merged === undefined || this.responseTags(plan) === false) return undefined;
    merged.date = formatHttpDate(now);
    const f = this.freshness(plan, stored.status, merged, now);
    return f.storable ? { merged, f } : undefined;
  }

  /** The handler's answer to a revalidation: the stored response renewed (304) or replaced. */
  protected finishRevalidation(plan: CachePlan, stored: ServableResponse, response: CapturedResponse, storesItself = true): SharedResponse | null {
    // A refresh under the response's own key (inside the miss protocol): the cache stores what
    // the loader's verdict says, with the route's stale windows.
    if (!storesItself) return response.status === 304 ? this.renewed(plan, stored, response) : this.finish(plan, response);
    if (response.status !== 304) {
      const shared = this.finish(plan, response);
      const decision = shared?.decision;
      if (shared !== null && typeof decision === 'object') void storeComputed(this.cache, plan.key, shared.bytes, this.setOptions(plan, decision.ttl, response.startedAt)).catch(() => {});
      // A response that may not be stored removes the stale one (RFC 9111 §4.4 allows it).
      else if (shared === null) void this.cache.delete(plan.key).catch(() => {});
      // Stored by the revalidation itself: the lead only shares it.
      return shared === null ? null : { bytes: shared.bytes, decision: 'share' };
    }
    const shared = this.renewed(plan, stored, response);
    if (shared === null) {
      void this.cache.delete(plan.key).catch(() => {});
      return null;
    }
    const ttl = typeof shared.decision === 'object' ? shared.decision.ttl : 1;
    // Renewed with the tags of the request and of the 304's own Dogpile-Tags.
    void storeComputed(this.cache, plan.key, shared.bytes, this.setOptions(plan, ttl, response.startedAt)).catch(() => {});
    return { bytes: shared.bytes, decision: 'share' };
  }

  /** The stored response renewed by a 304 (RFC 9111 §4.3.4), with the verdict that stores it, or null when the 304 does not renew it. */
  private renewed(plan: CachePlan, stored: ServableResponse, response: CapturedResponse): SharedResponse | null {
    const renewal = this.renewal(plan, stored, response.headers, Date.now());
    if (renewal === undefined) return null;
    const { merged, f } = renewal;
    const bytes = encodeResponse({
      createdAt: this.cache.now(),
      status: stored.status,
      headers: storableHeaders(merged, f.omitHeaders),
      vary: stored.vary,
      body: stored.body,
      freshFor: f.ttl,
      ageOnArrival: f.initialAge,
      staleIfError: ownStaleIfError(f),
    });
    const decision = storeDecisionOf(f, this.storageTtl(plan, f, merged));
    const own = this.responseTags(plan);
    if (own !== false && own.length > 0) decision.tags = [...own];
    return { bytes, decision };
  }

  /**
   * How long the store keeps a response. One with a validator (`ETag`, `Last-Modified`) is kept
   * past its lifetime, for revalidation, unless a stale window keeps it anyway (its own
   * `stale-while-revalidate` / `stale-if-error`, else the route's and the cache's: then a stale
   * copy is served while the refresh runs the handler conditionally): once stale, the next request runs the
   * handler with `If-None-Match` / `If-Modified-Since` and a 304 renews it (RFC 9111 §4.3).
   * It is kept for the adapter's ttl (else a minute, within maxTtl) after its lifetime.
   */
  protected storageTtl(plan: CachePlan, f: StorableFreshness, headers: CapturedResponse['headers']): number {
    const forRevalidation = Math.max(1, Math.min(this.options.maxTtl, plan.ttl > 0 ? plan.ttl : 60_000));
    if (f.ttl < 1) return forRevalidation;
    if (!hasValidator(headers) || this.keptStale(plan, f)) return f.ttl;
    return f.ttl + forRevalidation;
  }

  /** Whether the store keeps this response stale past its lifetime anyway (a stale window applies to it). */
  protected keptStale(plan: CachePlan, f: StorableFreshness): boolean {
    if (f.mustRevalidate) return false;
    const rules = this.cache.options.freshness;
    const window = (own: number | undefined, name: 'staleWhileRevalidate' | 'staleIfError'): number => own ?? routeWindow(plan.freshness, rules, name);
    return window(f.staleWhileRevalidate, 'staleWhileRevalidate') > 0 || window(f.staleIfError, 'staleIfError') > 0;
  }

  /** The leader's response is complete: the bytes to store and share, or null to share nothing. */
  protected finish(plan: CachePlan, response: CapturedResponse): SharedResponse | null {
    if (response.tooBig) return null;
    const now = Date.now();
    // Not storable, or stale at once (max-age=0, a past Expires, no-cache) without a validator
    // to revalidate it with: shared with nobody.
    const f = this.storable(plan, response.status, response.headers, undefined, now);
    const vary = parseVary(headerValue(response.headers, 'vary'));
    if (f === undefined || vary === '*') {
      if (plan.fallback !== undefined && !ORIGIN_ERROR_STATUSES.has(response.status)) this.refusedRefreshes.add(plan.key);
      return null;
    }
    const headers = storableHeaders(response.headers, f.omitHeaders);
    // Node writes a Date on every response the app did not give one: the one sent is this one.
    if (!headers.some(([name]) => name === 'date')) headers.push(['date', formatHttpDate(now)]);
    const bytes = encodeResponse({
      createdAt: this.cache.now(),
      status: response.status,
      headers,
      vary: vary.map((name) => [name, headerValue(plan.headers, name)] as const),
      body: response.body,
      freshFor: f.ttl,
      ageOnArrival: f.initialAge,
      staleIfError: ownStaleIfError(f),
    });
    const storeFor = this.storageTtl(plan, f, response.headers);
    const decision = storeDecisionOf(f, storeFor);
    const own = this.responseTags(plan);
    if (own !== false && own.length > 0) decision.tags = [...own];
    const madeUp = plan.record !== undefined && plan.madeUpRecord === true;
    if (vary.length > 0 && (madeUp || !sameNames(plan.record?.names, vary))) {
      // A response that varies, under a key that does not say so (or under a generation made up
      // before the URL's record could be read): stored as a variant, and the URL's key tells
      // every process what it varies on. The requests waiting here get it as it is.
      void this.storeVariant(plan, vary, madeUp ? undefined : plan.record?.gen, bytes, storeFor, response.startedAt);
      return { bytes, decision: 'share' };
    }
    if (plan.record !== undefined) void this.refreshRecord(plan.base, plan.record);
    return { bytes, decision };
  }

  /** The generation of a URL's new `VaryRecord`: that of the record this process is writing for the same names, else a new one. */
  protected generationFor(base: string, names: readonly string[]): string {
    const writing = this.writingRecords.get(base);
    return writing !== undefined && sameNames(writing.names, names) ? writing.gen : newGeneration();
  }

  /**
   * Stores a variant and the URL's record. Without a known generation (`gen`), it takes that of
   * the record this process is writing for the same names, else a new one; meanwhile it reads
   * the URL's record, and when another request has written one for the same names since this
   * one found none, the variant is stored under that record's generation too and the record is
   * kept: two requests for two variants that both found no record do not orphan each other's.
   */
  protected async storeVariant(plan: CachePlan, names: readonly string[], gen: string | undefined, bytes: Buffer, ttl: number, startedAt: number): Promise<void> {
    const writing = this.writingRecords.get(plan.base);
    const known = gen !== undefined || (writing !== undefined && sameNames(writing.names, names));
    const record: VaryRecord = gen !== undefined ? { names, gen } : known ? writing! : { names, gen: newGeneration() };
    this.writingRecords.set(plan.base, record);
    let writingNow = record;
    try {
      const [, current] = await Promise.all([
        storeComputed(this.cache, variantKey(plan.base, record, plan.headers), bytes, this.setOptions(plan, ttl, startedAt)),
        known ? undefined : this.cache.get(plan.base).then(toVaryRecord, () => undefined),
      ]);
      if (current !== undefined && current.gen !== record.gen && sameNames(current.names, names)) {
        if (this.writingRecords.get(plan.base) === record) this.writingRecords.set(plan.base, (writingNow = current));
        await storeComputed(this.cache, variantKey(plan.base, current, plan.headers), bytes, this.setOptions(plan, ttl, startedAt));
        await this.cache.set(plan.base, encodeVaryRecord(current), this.options.maxTtl);
      } else {
        await this.cache.set(plan.base, encodeVaryRecord(record), this.options.maxTtl);
      }
    } catch {
      // Reported by the cache's backendError event; the next request runs the handler.
    } finally {
      if (this.writingRecords.get(plan.base) === writingNow) this.writingRecords.delete(plan.base);
    }
  }

  /** Keeps the URL's VaryRecord as long as the variants it leads to. */
  protected async refreshRecord(base: string, record: VaryRecord): Promise<void> {
    try {
      await this.cache.set(base, encodeVaryRecord(record), this.options.maxTtl);
    } catch {
      // As above.
    }
  }
}

type StorableFreshness = Extract<Freshness, { storable: true }>;


/** A valid `Content-Length` (digits only, one value), or undefined. */
function contentLength(headers: CapturedResponse['headers']): number | undefined {
  const value = headers['content-length'];
  const text = Array.isArray(value) ? (value.length === 1 ? String(value[0]) : undefined) : value === undefined ? undefined : String(value);
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}

export function hasValidator(headers: CapturedResponse['headers']): boolean {
  return Object.keys(revalidationHeaders(headers)).length > 0;
}

export function sameNames(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((name, i) => name === b[i]);
}
