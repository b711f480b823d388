import type { IncomingHttpHeaders } from 'node:http';
import type { CacheDecision, DogpileCache, LoaderContext, StoreDecision } from '../core/cache.js';
import { getDefaultCache } from '../core/default-cache.js';
import { resolveInline, setComputed } from '../core/internal.js';
import type { FreshnessOptions } from '../core/freshness.js';
import { httpChannel, traceHttp } from '../shared/diagnostics.js';
import { CacheClosedError, InvalidOptionError } from '../shared/errors.js';
import { describe } from '../shared/duration.js';
import { mergeTags, validateTags } from '../shared/tag-names.js';
import { requestHost, userCacheKey } from './cache-key.js';
import { requestBypassReason } from './cacheability.js';
import { formatCacheStatus, type CacheStatusEntry } from './cache-status.js';
import { evaluateConditional, mergeNotModified, notModifiedHeaders, revalidationHeaders } from './conditional.js';
import { answerRange } from './range.js';
import { ResponseCapture, type CapturedResponse } from './capture.js';
import { responseFreshness, storeDecisionOf, type Freshness } from './freshness.js';
import { headerValue, parseVary, storableHeaders, type HeaderEntry } from './headers.js';
import { formatHttpDate } from './http-date.js';
import { resolveHttpCacheOptions, type HttpCacheOptions, type ResolvedHttpCacheOptions } from './options.js';
import { defaultKeyInvalidation, invalidationTargets } from './invalidation.js';
import { requestBaseKey, RequestClaims, withUrlTag } from './request-plan.js';
import { storeOptions, type StoreOptions } from './store-options.js';
import { encodeVaryRecord, newGeneration, toVaryRecord, variantKey, type VaryRecord } from './vary-record.js';
import { encodeResponse } from './response-format.js';
import { ORIGIN_ERROR_STATUSES, ownStaleIfError, routeWindow, staleInsteadOf } from './stale-on-error.js';
import { prepareResponse, remainingFreshness, toServable, varyMatches, xCacheFor, type PreparedResponse, type ServableResponse, type XCache } from './serve.js';

/** The parts of a request the cache looks at. */
export interface HttpRequestInfo {
  method: string;
  /** Path and query as received (Express: `req.originalUrl`; Fastify: `request.url`). */
  url: string;
  headers: IncomingHttpHeaders;
}

/** A request the cache will handle: its key and how long its response is kept. */
export interface CachePlan {
  head: boolean;
  /** The key without the `Vary` part: the URL's own key, where its response or its `VaryRecord` is. */
  base: string;
  key: string;
  ttl: number;
  headers: IncomingHttpHeaders;
  /** The URL's `VaryRecord` this plan's key was built from (the key is then a variant's). */
  record?: VaryRecord;
  retried: boolean;
  /**
   * Answered from a stored response or else by the handler alone, never leading nor storing:
   * a GET with `Range` (the handler's 206 is never stored).
   */
  lookupOnly?: boolean;
  /** A stored response that needs revalidation: the handler runs with its validators. */
  revalidating?: ServableResponse;
  /** The stored response this run refreshes, past its freshness: served instead of the origin's failure when it allows it. */
  fallback?: ServableResponse;
  /** The leader's own conditional headers, taken off the request its handler sees. */
  conditional?: { 'if-none-match'?: string; 'if-modified-since'?: string };
  /** The leader's `Dogpile-Cache-Control`, taken off its response before it was sent. */
  targeted?: string;
  /** The tags of the request (the `tags` option), validated. */
  tags?: readonly string[];
  /** The leader's `Dogpile-Tags`, taken off its response before it was sent. */
  tagged?: string;
  /** The stale-serving options of this route (the adapter's, then the route's). */
  freshness: FreshnessOptions;
}

/** What an adapter does for the guard; each call happens at most once per request. */
export interface Exchange {
  /**
   * Let the framework run the route handler for this request (`X-Cache: MISS`). With a
   * `capture`, the adapter feeds it the response the handler sends: the requests waiting for
   * this one are served from it. `plan` is then the plan this run leads (a `Vary` variant's
   * when the URL's responses vary, not the one the adapter made): the one to hand back to the
   * guard's calls about this response.
   */
  proceed(capture: ResponseCapture | undefined, plan?: CachePlan): void;
  /** Answer from the cache; the handler does not run. */
  serve(response: PreparedResponse): void;
  /** Pass an error on to the framework's error handling. */
  fail(error: unknown): void;
  /**
   * For a HEAD request: `proceed(capture)` runs the route's GET handler and captures the full
   * response it produces, while the client still gets headers only. A HEAD miss then leads or
   * joins a GET flight like a GET; without it, a HEAD miss runs the handler and stores nothing.
   */
  readonly headAsGet?: boolean;
}

/** Raw requests (`IncomingMessage`) already handled by a guard, so an app-wide and a route guard never both act. */
const handled = new RequestClaims();

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** The lifetime each stored response was given by its own headers. */
const storeDecisions = new WeakMap<Buffer, StoreDecision | 'share'>();

const decide = (value: Buffer | null): CacheDecision => (value === null ? 'private' : (storeDecisions.get(value) ?? 'store'));

/**
 * The framework-neutral part of the HTTP adapters: which requests and responses may be
 * cached, the key, the lead/wait flow over `DogpileCache.resolve`, and what to write back.
 * An adapter turns its request into `HttpRequestInfo`, calls `plan()` then `handle()`, and
 * implements `Exchange`.
 */
export class HttpGuard<Req> {
  readonly options: ResolvedHttpCacheOptions<Req>;
  private readonly pending = new Set<ResponseCapture>();
  /**
   * The `VaryRecord`s this process is writing (a URL's key → its record), until the write has
   * landed: a request for another variant of the URL that arrives meanwhile finds no record in
   * the store yet, and takes this one's generation instead of making one that would orphan the
   * variant being stored.
   */
  private readonly writingRecords = new Map<string, VaryRecord>();
  /** Keys whose refresh here was answered with a response that may not be stored: until it settles, their stale copy is nobody's answer (RFC 5861 §3). */
  private readonly refusedRefreshes = new Set<string>();

  constructor(options?: HttpCacheOptions<Req>, resolveOptions?: { extra?: readonly string[] }) {
    this.options = resolveHttpCacheOptions(options, resolveOptions);
  }

  /** The cache in use: the one given, or the default cache at the time of the call. */
  get cache(): DogpileCache {
    return this.options.cache ?? getDefaultCache();
  }

  /**
   * Whether the cache handles this request, and under which key; undefined lets it through
   * untouched. `marker` identifies the request (the raw `IncomingMessage`): a request is planned
   * at most once, whichever guard sees it first.
   */
  plan(req: Req, info: HttpRequestInfo, marker: object, ttl: number = this.options.ttl, freshness: FreshnessOptions = this.options.freshness): CachePlan | undefined {
    const { method, headers } = info;
    if (method !== 'GET' && method !== 'HEAD') return undefined;
    if (handled.has(marker)) return undefined;
    const { key: keyFn, skip } = this.options;
    if (skip !== undefined && skip(req)) return undefined;
    const reason = requestBypassReason(method, headers, keyFn === undefined ? this.options.privateHeaders : []);
    // A GET with Range is answered from a stored full response when there is one (lookupOnly).
    const range = reason === 'range' && method === 'GET';
    if (reason !== undefined && !range) return undefined;
    let userKey: string | undefined;
    if (keyFn !== undefined) {
      const k = keyFn(req);
      if (!k) return undefined;
      if (typeof k !== 'string') throw new InvalidOptionError('key', `must return a string (or a falsy value to skip the cache), got ${describe(k)}`);
      userKey = k;
    }
    const base = requestBaseKey(method, info.url, headers, userKey);
    const tags = userKey === undefined ? withUrlTag(this.requestTags(req), info.url, headers) : this.requestTags(req);
    if (tags === false) return undefined; // no room left for the URL's tag: passes uncached
    handled.claim(marker);
    const plan: CachePlan = { head: method === 'HEAD', base, key: base, ttl, headers, retried: false, lookupOnly: range, freshness };
    if (tags !== undefined) plan.tags = tags;
    return plan;
  }

  /** The `tags` option's tags for a request (validated: `InvalidOptionError`), or undefined for none. */
  private requestTags(req: Req): readonly string[] | undefined {
    const tagsFn = this.options.tags;
    if (tagsFn === undefined) return undefined;
    const given = tagsFn(req);
    if (given === undefined || given === null) return undefined;
    const tags = validateTags(given, 'tags');
    return tags.length > 0 ? tags : undefined;
  }

  /** Serves, waits or leads. Never throws; errors go to `exchange.fail`. */
  handle(plan: CachePlan, exchange: Exchange): void {
    try {
      if ((plan.head && exchange.headAsGet !== true) || plan.lookupOnly === true) this.handleHead(plan, exchange);
      else this.handleGet(plan, exchange);
    } catch (error) {
      exchange.fail(error);
    }
  }

  /** True when a guard has already planned this request (the raw `IncomingMessage`). */
  static claimed(marker: object): boolean {
    return handled.has(marker);
  }

  /** Abandons every capture still in progress (one waiter leads instead): for shutdown. */
  abandonPending(): void {
    for (const capture of [...this.pending]) capture.abandon();
  }

  /**
   * The `Cache-Status` value for a GET or HEAD that a request rule made pass the cache
   * (`fwd=bypass; detail=authorization`), or undefined.
   */
  bypassStatus(info: HttpRequestInfo): string | undefined {
    if (info.method !== 'GET' && info.method !== 'HEAD') return undefined;
    const reason = requestBypassReason(info.method, info.headers, this.options.key === undefined ? this.options.privateHeaders : []);
    return reason === undefined ? undefined : this.member({ fwd: 'bypass', detail: reason });
  }

  /** This cache's `Cache-Status` member for an entry. */
  member(entry: CacheStatusEntry): string {
    return formatCacheStatus(entry, this.options.cacheStatusName);
  }

  /**
   * What a response's headers say to this cache, for the request `plan` (RFC 9111 §3, §4.2;
   * RFC 9213): whether it may be stored and for how long.
   */
  freshness(plan: CachePlan, status: number, headers: CapturedResponse['headers'], now = Date.now()): Freshness {
    const bag = plan.targeted !== undefined && headers['dogpile-cache-control'] === undefined ? { ...headers, 'dogpile-cache-control': plan.targeted } : headers;
    return responseFreshness(status, bag, { now, defaultTtl: plan.ttl, maxTtl: this.options.maxTtl, statuses: this.options.statuses });
  }

  /**
   * The headers of the leader's response are about to be sent: takes `Dogpile-Cache-Control`
   * off it (kept in the plan for the decision to store) and returns its `Cache-Status` member.
   * It says `stored` only when the response is what the capture will store: storable by its
   * headers as they are now, a body within `maxBodySize` (`bodySize`, else its
   * `Content-Length`), and, for a 304 to a revalidation, one that selects and renews the
   * stored response. What cannot be known yet can still keep it out of the store: headers
   * added after this point (another middleware's `writeHead` hook, such as a session cookie),
   * a body without a length that grows past `maxBodySize`, a stream that breaks, a store that
   * cannot be reached.
   */
  leaderHeaders(plan: CachePlan, status: number, headers: CapturedResponse['headers'], targeted: string | undefined, captured = true, bodySize?: number): string {
    if (targeted !== undefined) plan.targeted = targeted;
    if (!captured) return this.member({ fwd: 'miss' });
    if (plan.revalidating !== undefined && status === 304) {
      const renewed = this.renewal(plan, plan.revalidating, headers);
      return this.member(renewed === undefined ? { fwd: 'stale', fwdStatus: 304 } : { fwd: 'stale', fwdStatus: 304, stored: true });
    }
    const f = this.storable(plan, status, headers, bodySize);
    const fwd = plan.revalidating !== undefined ? 'stale' : 'miss';
    return this.member(f !== undefined ? { fwd, stored: true, ttl: f.ttl } : { fwd });
  }

  /**
   * The freshness of a response the capture may store, or undefined: not storable, stale at
   * once without a validator to revalidate it with (shared with nobody), or a body over
   * `maxBodySize` (`bodySize`, else a valid `Content-Length`).
   */
  private storable(plan: CachePlan, status: number, headers: CapturedResponse['headers'], bodySize?: number, now = Date.now()): StorableFreshness | undefined {
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
  private responseTags(plan: CachePlan): readonly string[] | false {
    if (plan.tagged === undefined) return [];
    try {
      const own = validateTags(plan.tagged.split(',').map((s) => s.trim()).filter((s) => s !== ''), 'Dogpile-Tags');
      mergeTags(plan.tags, own, 'Dogpile-Tags');
      return own;
    } catch {
      return false;
    }
  }

  /** Every tag of the leader's entry (the request's and its response's), for a write outside the miss protocol. */
  private entryTags(plan: CachePlan): readonly string[] | undefined {
    const own = this.responseTags(plan);
    return mergeTags(plan.tags, own === false ? undefined : own, 'Dogpile-Tags');
  }

  /** `cache.set` options, at the moment of the write, for a response written outside the miss protocol (see `storeOptions`). */
  private setOptions(plan: CachePlan, ttl: number, startedAt: number): StoreOptions {
    return storeOptions(ttl, this.entryTags(plan), startedAt);
  }

  /**
   * The stored response renewed by the handler's 304 to a revalidation (RFC 9111 §4.3.4): its
   * merged headers (with a new `Date`) and their freshness, or undefined when the 304 does not
   * select it or the merged response may not be stored.
   */
  private renewal(plan: CachePlan, stored: ServableResponse, headersOf304: CapturedResponse['headers'], now = Date.now()): { merged: Record<string, string | string[]>; f: StorableFreshness } | undefined {
    const merged = mergeNotModified(stored.headerObject, headersOf304);
    if (merged === undefined || this.responseTags(plan) === false) return undefined;
    merged.date = formatHttpDate(now);
    const f = this.freshness(plan, stored.status, merged, now);
    return f.storable ? { merged, f } : undefined;
  }

  /**
   * True when the leader's client sent a conditional request that the full response its
   * handler produced satisfies: that client gets a 304 (RFC 9110 §13.2.2), the others and
   * the store the full response.
   */
  leaderNotModified(plan: CachePlan, status: number, headers: CapturedResponse['headers']): boolean {
    const conditional = plan.conditional;
    if (conditional === undefined || Object.keys(conditional).length === 0) return false;
    return evaluateConditional(conditional, headers, { method: 'GET', status }) === '304';
  }

  /**
   * The handler answered a revalidation with a 304 that selects the stored response (RFC 9111
   * §4.3.4): what its client gets instead, the stored response with its headers renewed.
   */
  revalidated304(plan: CachePlan, status: number, headers: CapturedResponse['headers']): { status: number; headers: Record<string, string | string[]>; body: Buffer } | undefined {
    const stored = plan.revalidating;
    if (stored === undefined || status !== 304) return undefined;
    const merged = mergeNotModified(stored.headerObject, headers);
    if (merged === undefined) return undefined;
    merged.date = formatHttpDate(Date.now());
    delete merged['dogpile-cache-control'];
    delete merged['content-length'];
    // The client's own conditional request, answered from the renewed response.
    const conditional = plan.conditional;
    if (conditional !== undefined && Object.keys(conditional).length > 0 && evaluateConditional(conditional, merged, { method: 'GET', status: stored.status }) === '304') {
      return { status: 304, headers: notModifiedHeaders(merged), body: Buffer.alloc(0) };
    }
    merged['content-length'] = String(stored.body.length);
    return { status: stored.status, headers: merged, body: stored.body };
  }

  /**
   * The handler's response to a refresh is an origin failure (a 500, 502, 503 or 504, the
   * framework's answer to a handler that threw included): the stored response its client gets
   * instead when its own `stale-if-error` window, else the route's `staleIfError`, allows it
   * (RFC 5861 §4), never one that forbids serving stale; else undefined. The adapter then fails
   * the capture, so the requests waiting for this run are served the same stale response.
   */
  staleOnError(plan: CachePlan, status: number): PreparedResponse | undefined {
    const window = routeWindow(plan.freshness, this.cache.options.freshness, 'staleIfError');
    return staleInsteadOf(status, plan.fallback, this.cache.now(), window, plan.conditional ?? {}, plan.head ? 'HEAD' : 'GET', (entry) => this.member(entry));
  }

  /**
   * The loader that makes this request the leader: its handler runs with a capture that hands
   * the response to `finish`. The handler must produce the full response for the others, not a
   * 304 for this client's copy, so this client's conditional headers are taken off the request
   * (its own client still gets the answer to them: leaderNotModified); `prepare` adjusts the
   * request further before the handler sees it. `ran` tells whether the loader ran here.
   */
  private leaderLoader(
    plan: CachePlan,
    exchange: Exchange,
    finish: (response: CapturedResponse) => Buffer | null,
    prepare?: () => void,
  ): { loader: () => Promise<Buffer | null>; ran: boolean } {
    const lead = {
      ran: false,
      loader: (): Promise<Buffer | null> => {
        lead.ran = true;
        const capture = new ResponseCapture(this.options.maxBodySize, finish, (c) => this.pending.delete(c), this.cache.options.waitTimeout);
        this.pending.add(capture);
        plan.conditional = {};
        for (const name of ['if-none-match', 'if-modified-since'] as const) {
          if (plan.headers[name] !== undefined) plan.conditional[name] = plan.headers[name];
          delete plan.headers[name];
        }
        prepare?.();
        try {
          exchange.proceed(capture, plan);
        } catch (error) {
          capture.share(null);
          exchange.fail(error);
        }
        return capture.promise;
      },
    };
    return lead;
  }

  /**
   * A stored response that may not be reused without the handler (`no-cache`, `max-age=0`
   * with a validator): the handler runs with `If-None-Match` / `If-Modified-Since` from it,
   * once for every request that needs it meanwhile (RFC 9111 §4.3.1). A 304 renews the
   * stored response, a full response replaces it.
   */
  private revalidate(plan: CachePlan, stored: ServableResponse, exchange: Exchange): void {
    const lead = this.leaderLoader(plan, exchange, (response) => this.finishRevalidation(plan, stored, response), () => {
      Object.assign(plan.headers, revalidationHeaders(stored.headerObject));
      plan.revalidating = stored;
    });
    const { loader } = lead;
    const cacheable = (value: Buffer | null): CacheDecision => (value === null ? 'private' : 'share');
    this.cache.resolve(`${plan.key}\n#revalidate`, loader, { ttl: 1000, cacheable, onWaitTimeout: 'load', hitForMissTtl: 0 }).then(
      (result) => {
        if (lead.ran) return;
        try {
          this.serveValue(plan, result.value, 'COALESCED', exchange);
        } catch (error) {
          exchange.fail(error);
        }
      },
      (error: unknown) => {
        if (lead.ran) return;
        if (error instanceof CacheClosedError) exchange.proceed(undefined);
        else exchange.fail(error);
      },
    );
  }

  /** The handler's answer to a revalidation: the stored response renewed (304) or replaced. */
  private finishRevalidation(plan: CachePlan, stored: ServableResponse, response: CapturedResponse): Buffer | null {
    if (response.status !== 304) {
      const bytes = this.finish(plan, response);
      const decision = bytes === null ? undefined : storeDecisions.get(bytes);
      if (bytes !== null && typeof decision === 'object') void setComputed(this.cache, plan.key, bytes, ...this.setOptions(plan, decision.ttl, response.startedAt)).catch(() => {});
      // A response that may not be stored removes the stale one (RFC 9111 §4.4 allows it).
      else if (bytes === null) void this.cache.delete(plan.key).catch(() => {});
      return bytes;
    }
    const now = Date.now();
    const renewed = this.renewal(plan, stored, response.headers, now);
    if (renewed === undefined) {
      void this.cache.delete(plan.key).catch(() => {});
      return null;
    }
    const { merged, f } = renewed;
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
    // Renewed with the tags of the request and of the 304's own Dogpile-Tags.
    void setComputed(this.cache, plan.key, bytes, ...this.setOptions(plan, this.storageTtl(plan, f, merged), response.startedAt)).catch(() => {});
    return bytes;
  }

  /**
   * How long the store keeps a response. One with a validator (`ETag`, `Last-Modified`) is kept
   * past its lifetime, for revalidation, unless a stale window keeps it anyway (its own
   * `stale-while-revalidate` / `stale-if-error`, else the route's and the cache's: then a stale
   * copy is served while the refresh runs the handler conditionally): once stale, the next request runs the
   * handler with `If-None-Match` / `If-Modified-Since` and a 304 renews it (RFC 9111 §4.3).
   * It is kept for the adapter's ttl (else a minute, within maxTtl) after its lifetime.
   */
  private storageTtl(plan: CachePlan, f: StorableFreshness, headers: CapturedResponse['headers']): number {
    const forRevalidation = Math.max(1, Math.min(this.options.maxTtl, plan.ttl > 0 ? plan.ttl : 60_000));
    if (f.ttl < 1) return forRevalidation;
    if (!hasValidator(headers) || this.keptStale(plan, f)) return f.ttl;
    return f.ttl + forRevalidation;
  }

  /** Whether the store keeps this response stale past its lifetime anyway (a stale window applies to it). */
  private keptStale(plan: CachePlan, f: StorableFreshness): boolean {
    if (f.mustRevalidate) return false;
    const rules = this.cache.options.freshness;
    const window = (own: number | undefined, name: 'staleWhileRevalidate' | 'staleIfError'): number => own ?? routeWindow(plan.freshness, rules, name);
    return window(f.staleWhileRevalidate, 'staleWhileRevalidate') > 0 || window(f.staleIfError, 'staleIfError') > 0;
  }

  private handleGet(plan: CachePlan, exchange: Exchange): void {
    const lead = this.leaderLoader(plan, exchange, (response) => this.finish(plan, response));
    // A refresh of a stored response that has a validator (inside a stale window) runs the
    // handler conditionally, as a revalidation does: a 304 renews the stored response without
    // a new body (RFC 9111 §4.3.1, §4.3.4).
    const loader = (ctx: LoaderContext): Promise<Buffer | null> => {
      const stored = ctx.stale === undefined ? undefined : toServable(ctx.stale.value);
      if (stored !== undefined) plan.fallback = stored;
      if (stored === undefined || !hasValidator(stored.headerObject) || (plan.head && exchange.headAsGet !== true) || plan.lookupOnly === true) return lead.loader();
      const conditional = this.leaderLoader(
        plan,
        exchange,
        (response) => {
          // Stored (or renewed) by the revalidation itself: the lead only shares it.
          const bytes = this.finishRevalidation(plan, stored, response);
          if (bytes !== null) storeDecisions.set(bytes, 'share');
          return bytes;
        },
        () => {
          Object.assign(plan.headers, revalidationHeaders(stored.headerObject));
          plan.revalidating = stored;
        },
      );
      lead.ran = true;
      return conditional.loader();
    };
    // The stored lifetime is the response's own (the cacheable decision carries it); the call's
    // ttl must still be valid when the adapter's is 0. A stale response inside
    // staleWhileRevalidate: every request but one is answered with it at once (X-Cache: STALE);
    // the one that wins the refresh lead runs its handler (X-Cache: MISS).
    const options = {
      ttl: Math.max(plan.ttl, 1),
      ...(plan.tags === undefined ? {} : { tags: plan.tags }),
      cacheable: decide,
      onWaitTimeout: 'load' as const,
      hitForMissTtl: this.options.hitForMissTtl,
      ...plan.freshness,
    };
    const resolve = () => resolveInline(this.cache, plan.key, loader, options);
    (httpChannel.hasSubscribers ? traceHttp(plan.key, plan.head ? 'HEAD' : 'GET', resolve) : resolve()).then(
      (result) => {
        // When the loader ran for this request, its handler has answered it already.
        if (lead.ran) return void this.refusedRefreshes.delete(plan.key);
        try {
          this.serveValue(plan, result.value, xCacheFor(result.status), exchange);
        } catch (error) {
          exchange.fail(error);
        }
      },
      (error: unknown) => {
        if (lead.ran) return void this.refusedRefreshes.delete(plan.key);
        // A closed cache (shutting down) still lets the app answer.
        if (error instanceof CacheClosedError) exchange.proceed(undefined);
        else exchange.fail(error);
      },
    );
  }

  private handleHead(plan: CachePlan, exchange: Exchange): void {
    // HEAD on a route where it cannot run as a GET (an explicit HEAD handler produces no body
    // to store): answered from the GET entry when there is one, else the handler runs.
    this.cache.get(plan.key).then(
      (value) => {
        try {
          if (value === undefined) exchange.proceed(undefined);
          else this.serveValue(plan, value, 'HIT', exchange);
        } catch (error) {
          exchange.fail(error);
        }
      },
      // Redis trouble is reported by the cache's `backendError` event; the app still answers.
      () => exchange.proceed(undefined),
    );
  }

  private serveValue(plan: CachePlan, value: unknown, xCache: XCache, exchange: Exchange): void {
    const record = plan.record === undefined ? toVaryRecord(value) : undefined;
    if (record !== undefined) {
      // The URL's responses vary: look up this request's variant.
      this.handle({ ...plan, record, key: variantKey(plan.base, record, plan.headers) }, exchange);
      return;
    }
    const stored = toServable(value);
    // Not a stored response (something else wrote this key), or a stale one whose refresh here
    // was just answered with a response that may not be stored: let the app answer.
    if (stored === undefined || (xCache === 'STALE' && this.refusedRefreshes.has(plan.key))) {
      exchange.proceed(undefined);
      return;
    }
    if (!varyMatches(stored, plan.headers)) {
      this.varyMismatch(plan, stored, exchange);
      return;
    }
    // How long it has been stored, on the cache's clock (the one it was stored on).
    const now = this.cache.now();
    const remaining = remainingFreshness(stored, now);
    if (remaining <= 0 && xCache !== 'STALE') {
      // Not to be reused without the handler (RFC 9111 §4.2.4, §4.3): a stored one is
      // revalidated (a GET); a request that waited for one (collapsed) runs its own handler.
      if (xCache !== 'HIT' || (plan.head && exchange.headAsGet !== true) || plan.lookupOnly === true) exchange.proceed(undefined);
      else this.revalidate(plan, stored, exchange);
      return;
    }
    const entry: CacheStatusEntry =
      xCache === 'HIT' || xCache === 'STALE' ? { hit: true, ttl: Number.isFinite(remaining) ? remaining : undefined } : { fwd: 'miss', collapsed: true };
    const prepared = prepareResponse(stored, plan.headers, xCache, now, this.member(entry), plan.head ? 'HEAD' : 'GET');
    exchange.serve(plan.lookupOnly === true && prepared.status === stored.status ? rangeOf(stored, prepared, plan.headers) : prepared);
  }

  /**
   * A response that varies on request headers this request does not share with the one that
   * produced it (a coalesced wait, or a variant key whose `Vary` changed since): look up again
   * under the variant key for every name (once), else let the handler answer.
   */
  private varyMismatch(plan: CachePlan, stored: ServableResponse, exchange: Exchange): void {
    if (plan.retried) {
      exchange.proceed(undefined);
      return;
    }
    const names = [...new Set([...(plan.record?.names ?? []), ...stored.vary.map(([name]) => name)])].sort();
    const record: VaryRecord = { names, gen: plan.record?.gen ?? this.generationFor(plan.base, names) };
    // Made up here, not read from the store: the one that stores a response under it checks the store first.
    if (plan.record === undefined) madeUpRecords.add(record);
    this.handle({ ...plan, record, key: variantKey(plan.base, record, plan.headers), retried: true }, exchange);
  }

  /** True for a method whose successful response invalidates stored responses (RFC 9111 §4.4). */
  static unsafe(method: string): boolean {
    return !SAFE_METHODS.has(method);
  }

  /**
   * Deletes the stored GET responses (every `Vary` variant) of the URLs a successful unsafe
   * request invalidates (RFC 9111 §4.4): its own, and its `Location` / `Content-Location` on
   * the same host, whatever forwarding headers the write carried (`defaultKeyInvalidation`).
   * With a `key` function, the key of its own URL is what that function returns
   * for `req` seen as a GET (`method` reads 'GET'; URL, headers and everything else are the
   * request's own, so a key that includes the identity finds that client's entry); the
   * `Location` / `Content-Location` URLs are then left alone, since no request for them exists
   * to ask the function about. Never rejects.
   */
  async invalidate(info: HttpRequestInfo, status: number, responseHeaders: CapturedResponse['headers'], req?: Req): Promise<void> {
    const host = requestHost(info.headers);
    const targets = invalidationTargets(info.method, status, info.url, host, responseHeaders);
    if (targets.length === 0) return;
    const keyFn = this.options.key;
    let keys: string[];
    let tags: string[] = [];
    if (keyFn === undefined) {
      ({ keys, tags } = defaultKeyInvalidation(targets, info.headers));
      for (const key of keys) this.writingRecords.delete(key);
    } else {
      if (req === undefined) return;
      let k: unknown;
      try {
        k = keyFn(readAsGet(req));
      } catch {
        // A key function that cannot answer for the GET view has nothing to invalidate.
        return;
      }
      keys = typeof k === 'string' && k !== '' ? [userCacheKey(k)] : [];
      for (const key of keys) this.writingRecords.delete(key);
    }
    await Promise.all([...keys.map((key) => this.cache.delete(key).catch(() => false)), tags.length === 0 ? undefined : this.cache.invalidateTags(tags).catch(() => undefined)]);
  }

  /** The leader's response is complete: the bytes to store and share, or null to share nothing. */
  private finish(plan: CachePlan, response: CapturedResponse): Buffer | null {
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
    const madeUp = plan.record !== undefined && madeUpRecords.has(plan.record);
    if (vary.length > 0 && (madeUp || !sameNames(plan.record?.names, vary))) {
      // A response that varies, under a key that does not say so (or under a generation made up
      // before the URL's record could be read): stored as a variant, and the URL's key tells
      // every process what it varies on. The requests waiting here get it as it is.
      void this.storeVariant(plan, vary, madeUp ? undefined : plan.record?.gen, bytes, storeFor, response.startedAt);
      storeDecisions.set(bytes, 'share');
    } else {
      if (plan.record !== undefined) void this.refreshRecord(plan.base, plan.record);
      storeDecisions.set(bytes, decision);
    }
    return bytes;
  }

  /** The generation of a URL's new `VaryRecord`: that of the record this process is writing for the same names, else a new one. */
  private generationFor(base: string, names: readonly string[]): string {
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
  private async storeVariant(plan: CachePlan, names: readonly string[], gen: string | undefined, bytes: Buffer, ttl: number, startedAt: number): Promise<void> {
    const writing = this.writingRecords.get(plan.base);
    const known = gen !== undefined || (writing !== undefined && sameNames(writing.names, names));
    const record: VaryRecord = gen !== undefined ? { names, gen } : known ? writing! : { names, gen: newGeneration() };
    this.writingRecords.set(plan.base, record);
    let writingNow = record;
    try {
      const [, current] = await Promise.all([
        setComputed(this.cache, variantKey(plan.base, record, plan.headers), bytes, ...this.setOptions(plan, ttl, startedAt)),
        known ? undefined : this.cache.get(plan.base).then(toVaryRecord, () => undefined),
      ]);
      if (current !== undefined && current.gen !== record.gen && sameNames(current.names, names)) {
        if (this.writingRecords.get(plan.base) === record) this.writingRecords.set(plan.base, (writingNow = current));
        await setComputed(this.cache, variantKey(plan.base, current, plan.headers), bytes, ...this.setOptions(plan, ttl, startedAt));
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
  private async refreshRecord(base: string, record: VaryRecord): Promise<void> {
    try {
      await this.cache.set(base, encodeVaryRecord(record), this.options.maxTtl);
    } catch {
      // As above.
    }
  }
}

/**
 * A GET with `Range` served from a stored full 200 (RFC 9110 §14): one satisfiable range as a
 * 206 with `Content-Range`, an unsatisfiable one as a 416, anything else (several ranges, an
 * `If-Range` that does not match, another status) as the full response.
 */
function rangeOf(stored: ServableResponse, prepared: PreparedResponse, requestHeaders: IncomingHttpHeaders): PreparedResponse {
  if (stored.status !== 200) return prepared;
  const answer = answerRange('GET', requestHeaders, stored.headerObject, stored.body.length);
  if (answer.status === 200) return prepared;
  const kept = stored.headers.filter(([name]) => name !== 'content-length' && name !== 'content-range');
  if (answer.status === 416) {
    const headers: HeaderEntry[] = [...kept.filter(([name]) => !name.startsWith('content-') || name === 'content-location'), ['content-range', answer.headers['content-range']], ['content-length', '0']];
    return { ...prepared, status: 416, headers, headerObject: Object.fromEntries(headers), body: Buffer.alloc(0) };
  }
  const headers: HeaderEntry[] = [...kept, ['content-range', answer.headers['content-range']], ['content-length', answer.headers['content-length']]];
  return { ...prepared, status: 206, headers, headerObject: Object.fromEntries(headers), body: stored.body.subarray(answer.start, answer.end + 1) };
}

/**
 * The request as a `key` function would see a GET of the same URL: `method` reads 'GET', all
 * else is the request (methods are called on the request itself).
 */
function readAsGet<Req>(req: Req): Req {
  if (req === null || typeof req !== 'object') return req;
  return new Proxy(req as object, {
    get(target, property) {
      if (property === 'method') return 'GET';
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as Req;
}

type StorableFreshness = Extract<Freshness, { storable: true }>;


/** A valid `Content-Length` (digits only, one value), or undefined. */
function contentLength(headers: CapturedResponse['headers']): number | undefined {
  const value = headers['content-length'];
  const text = Array.isArray(value) ? (value.length === 1 ? String(value[0]) : undefined) : value === undefined ? undefined : String(value);
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}

function hasValidator(headers: CapturedResponse['headers']): boolean {
  return Object.keys(revalidationHeaders(headers)).length > 0;
}

/** Records made up for a lookup before the URL's record was read (see varyMismatch). */
const madeUpRecords = new WeakSet<VaryRecord>();

function sameNames(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((name, i) => name === b[i]);
}
