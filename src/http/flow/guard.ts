import type { DogpileCache, LoaderContext } from '../../core/cache.js';
import { getDefaultCache } from '../../core/default-cache.js';
import type { FreshnessOptions } from '../../core/freshness.js';
import { getOrComputeChannel, httpChannel, traceHttp } from '../../shared/diagnostics.js';
import { CacheClosedError } from '../../shared/errors.js';
import { formatCacheStatus, type CacheStatusEntry } from '../rules/cache-status.js';
import { ResponseCapture, type CapturedResponse, type SharedResponse } from './capture.js';
import { answersOnly, asksPlainly, handled, RequestPlanner } from './request-planner.js';
import { leaderLoader, verdict } from './leader-loader.js';
import { invalidateAfterWrite, type PassThrough } from './pass-through.js';
import { NOT_FRESH, readIfFresh, resolveResponse } from './cache-calls.js';
import { resolveHttpCacheOptions, type HttpCacheOptions, type ResolvedHttpCacheOptions } from '../options.js';
import { isUnsafe } from '../rules/invalidation.js';
import { toVaryRecord, variantKey, type VaryRecord } from '../rules/vary-record.js';
import { DecodedResponses, plainHit, prepareResponse, rangeOf, remainingFreshness, varyMatches, xCacheFor, type PreparedResponse, type ServableResponse, type XCache } from './serve.js';
import type { CachePlan, Exchange, HttpRequestInfo, LeaderRun } from './plan-types.js';
import { leaderStatus } from '../rules/leader-rules.js';
import { hasValidator, type StoreRules } from '../rules/response-store.js';
import { ResponseWrites } from './response-writes.js';
import { reuseOf, staleInsteadOf } from './stale-on-error.js';
import { routeWindow } from '../rules/freshness.js';
import { refreshDetached, refreshOnceAnswered } from './background-refresh.js';
import type { Replay } from '../pipeline.js';

export type { CachePlan, Exchange, HttpRequestInfo, LeaderRun } from './plan-types.js';
export type { PassThrough } from './pass-through.js';

/**
 * The framework-neutral part of the HTTP adapters: which requests and responses may be
 * cached, the key, the lead/wait flow over `DogpileCache.resolve`, and what to write back.
 * An adapter turns its request into `HttpRequestInfo`, calls `plan()` then `handle()`, and
 * implements `Exchange`. The RFC 9111 decisions it applies are pure functions (`leader-rules`,
 * `response-store`, `freshness`, `conditional`, `serve`, `stale-on-error`); the cache is held,
 * not inherited, and its writes go through `ResponseWrites`.
 */
export class HttpGuard<Req> {
  readonly options: ResolvedHttpCacheOptions<Req>;
  /** Stored responses decoded once per value object (in-process hits), or per bytes read again under their key (Redis hits). */
  private readonly decoded = new DecodedResponses();
  /** What the guard writes to its cache once a leader's response is complete. */
  private readonly writes: ResponseWrites;
  private readonly pending = new Set<ResponseCapture>();
  private readonly planner: RequestPlanner<Req>;

  constructor(options?: HttpCacheOptions<Req>, resolveOptions?: { extra?: readonly string[] }) {
    this.options = resolveHttpCacheOptions(options, resolveOptions);
    this.planner = new RequestPlanner(this.options);
    this.writes = new ResponseWrites(
      () => this.cache,
      () => this.storeRules(),
    );
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

  /** The storage rules now: this guard's options and its cache's stale windows. */
  private storeRules(): StoreRules {
    const { maxTtl, maxBodySize, statuses } = this.options;
    return { maxTtl, maxBodySize, statuses, cacheFreshness: this.cache.options.freshness };
  }

  /**
   * Whether the cache handles this request, and under which key; undefined lets it through
   * untouched. `marker` identifies the request (the raw `IncomingMessage`): a request is planned
   * at most once, whichever guard sees it first.
   */
  plan(req: Req, info: HttpRequestInfo, marker: object, ttl: number = this.options.ttl, freshness: FreshnessOptions = this.options.freshness): CachePlan | undefined {
    const plan = this.planUnclaimed(req, info, marker, ttl, freshness);
    if (plan !== undefined) handled.claim(marker);
    return plan;
  }

  /**
   * `plan` without claiming the request: the adapter claims it (`HttpGuard.claim`) before
   * anything else can see it, unless `hitAtOnce` answers it there and then (a hit answered
   * synchronously reaches no other guard, and a claim is one more write to the request).
   */
  planUnclaimed(req: Req, info: HttpRequestInfo, marker: object, ttl: number = this.options.ttl, freshness: FreshnessOptions = this.options.freshness): CachePlan | undefined {
    return handled.has(marker) ? undefined : this.planner.plan(req, info, ttl, freshness);
  }

  /**
   * A plain hit known at once: the response process memory holds fresh for this plan (the
   * in-process store, or the L1 in front of Redis), prepared for a request with no validators
   * and no range. Undefined for everything else, which `handle` answers: an adapter calls this
   * first so that a hit needs no `Exchange` of its own. What it returns is what `handle` would
   * serve for the plan.
   */
  hitAtOnce(plan: CachePlan, headAsGet: boolean): PreparedResponse | undefined {
    if (!asksPlainly(plan) || (plan.head && !headAsGet)) return undefined;
    const value = this.valueAtOnce(plan);
    if (value === null || typeof value !== 'object') return undefined;
    // A value decoded before is a stored response; a URL's vary record goes through `handle`.
    const stored = this.decoded.known(value) ?? (toVaryRecord(value) === undefined ? this.decoded.decodeNew(value) : undefined);
    if (stored === undefined || !varyMatches(stored, plan.headers)) return undefined;
    const now = this.cache.now();
    const remaining = remainingFreshness(stored, now);
    return remaining > 0 ? plainHit(stored, remaining, now, this.hitMember) : undefined;
  }

  /** `member`, bound once: what a plain hit's `Cache-Status` is made with. */
  private readonly hitMember = (entry: CacheStatusEntry): string => this.member(entry);

  /** Serves, waits or leads. Never throws; errors go to `exchange.fail`. */
  handle(plan: CachePlan, exchange: Exchange): void {
    try {
      if (answersOnly(plan, exchange)) this.handleHead(plan, exchange);
      else this.handleGet(plan, exchange);
    } catch (error) {
      exchange.fail(error);
    }
  }

  /** True when a guard has already planned this request (the raw `IncomingMessage`). */
  static claimed(marker: object): boolean {
    return handled.has(marker);
  }

  /** Marks the request (the raw `IncomingMessage`) as handled by a guard: for a plan made by `planUnclaimed`. */
  static claim(marker: object): void {
    handled.claim(marker);
  }

  /** Abandons every capture still in progress (one waiter leads instead): for shutdown. */
  abandonPending(): void {
    for (const capture of [...this.pending]) capture.abandon();
  }

  /**
   * What the pipeline does for a request it does not answer (not planned): the header fields to
   * set on the handler's response (`Cache-Status: ...; fwd=bypass; detail=authorization` for a
   * GET or HEAD that a request rule made pass), and its work once the handler's status and
   * header fields are final: a successful write (RFC 9111 §4.4) deletes the stored responses it
   * invalidates. The adapter holds the response until that settles (it never rejects).
   * `cachedRoute` is false for a route the cache never covers (no bypass to report).
   */
  passing(info: HttpRequestInfo, req?: Req, cachedRoute = true): PassThrough {
    const bypass = cachedRoute ? this.planner.bypassReason(info) : undefined;
    return {
      headers: bypass === undefined ? [] : [['cache-status', this.member({ fwd: 'bypass', detail: bypass })]],
      afterHandler: (status, headers) =>
        isUnsafe(info.method) && status >= 200 && status <= 399
          ? invalidateAfterWrite(info, status, headers(), this.options.key, req, (keys, tags) => this.writes.invalidate(keys, tags))
          : undefined,
    };
  }

  /** A run's capture, handed to `finish` once complete; abandoned at shutdown while in progress (`abandonPending`). */
  private capturing(finish: (run: LeaderRun, response: CapturedResponse) => SharedResponse | null): (run: LeaderRun) => ResponseCapture {
    return (run) => {
      const capture = new ResponseCapture(this.options.maxBodySize, (response) => finish(run, response), (c) => this.pending.delete(c), this.cache.options.waitTimeout);
      this.pending.add(capture);
      return capture;
    };
  }

  /**
   * A stored response that may not be reused without the handler (`no-cache`, `max-age=0`
   * with a validator): the handler runs with `If-None-Match` / `If-Modified-Since` from it,
   * once for every request that needs it meanwhile (RFC 9111 §4.3.1). A 304 renews the
   * stored response, a full response replaces it.
   */
  private revalidate(plan: CachePlan, stored: ServableResponse, exchange: Exchange): void {
    const lead = leaderLoader(plan, exchange, this.capturing((run, response) => this.writes.finishRevalidation(run, stored, response)), stored);
    this.cache.resolve(`${plan.key}\n#revalidate`, (ctx) => lead.loader(ctx), { ttl: 1000, onWaitTimeout: 'load', hitForMissTtl: 0 }).then(
      (result) => {
        if (lead.ran) return;
        this.serveSettled(plan, result.value, 'COALESCED', exchange);
      },
      (error: unknown) => {
        if (lead.ran) return;
        if (error instanceof CacheClosedError) exchange.proceed(undefined);
        else exchange.fail(error);
      },
    );
  }

  private handleGet(plan: CachePlan, exchange: Exchange): void {
    if (this.hitsWithoutResolve(plan)) {
      const fresh = this.cache.peek(plan.key);
      if (fresh !== undefined) return this.serveValue(plan, fresh, 'HIT', exchange);
      // A response this process saw fresh in Redis: one GET, as `getOrCompute` reads it; what is
      // not a fresh hit goes through `resolve`.
      const read = readIfFresh(this.cache, plan.key);
      if (read !== undefined) {
        read.then((value) => {
          try {
            if (value === NOT_FRESH) this.resolveGet(plan, exchange);
            else this.serveValue(plan, value, 'HIT', exchange);
          } catch (error) {
            exchange.fail(error);
          }
        });
        return;
      }
    }
    this.resolveGet(plan, exchange);
  }

  /** `handleGet` through `resolve`: a hit, a wait for another request's handler, or this request's handler as the leader. */
  private resolveGet(plan: CachePlan, exchange: Exchange): void {
    const lead = leaderLoader(plan, exchange, this.capturing((run, response) => this.writes.finish(run, response)));
    const background = this.refreshesInBackground(plan, exchange);
    /** This request has been answered from the cache: a run of its loader now is detached from it. */
    let answered = false;
    // A refresh of a stored response that has a validator (inside a stale window) runs the
    // handler conditionally, as a revalidation does: a 304 renews the stored response without
    // a new body (RFC 9111 §4.3.1, §4.3.4).
    const foreground = (ctx: LoaderContext, stored: ServableResponse | undefined): Promise<Buffer | null> => {
      if (stored === undefined || !hasValidator(stored.headerObject) || answersOnly(plan, exchange)) return lead.loader(ctx, stored);
      const conditional = leaderLoader(
        plan,
        exchange,
        // Stored (or renewed) by the cache, with the route's stale windows: the loader's verdict says how.
        this.capturing((run, response) => this.writes.finishRevalidation(run, stored, response, false)),
        stored,
      );
      lead.ran = true;
      return conditional.loader(ctx, stored);
    };
    const loader = (ctx: LoaderContext): Promise<Buffer | null> => {
      const stored = ctx.stale === undefined ? undefined : this.decoded.decode(ctx.stale.value, plan.key);
      if (stored === undefined || !background) return foreground(ctx, stored);
      // A refresh: detached from this request when the cache answered it with the stale response.
      return refreshOnceAnswered(() => answered, () => refreshDetached(plan, stored, exchange.replay, this.options, this.writes).then((shared) => verdict(ctx, shared)), () => foreground(ctx, stored));
    };
    // The stored lifetime is the response's own (the cacheable decision carries it); the call's
    // ttl must still be valid when the adapter's is 0. A stale response inside
    // staleWhileRevalidate: every request is answered with it at once (X-Cache: STALE) and one
    // refresh runs detached (background), or the one that wins the refresh lead runs its
    // handler (X-Cache: MISS; foreground).
    const options = {
      ttl: Math.max(plan.ttl, 1),
      ...(plan.tags === undefined ? {} : { tags: plan.tags }),
      onWaitTimeout: 'load' as const,
      hitForMissTtl: this.options.hitForMissTtl,
      ...plan.freshness,
    };
    const resolve = () => resolveResponse(this.cache, plan.key, loader, options, !background);
    (httpChannel.hasSubscribers ? traceHttp(plan.key, plan.head ? 'HEAD' : 'GET', resolve) : resolve()).then(
      (result) => {
        // When the loader ran for this request, its handler has answered it already.
        if (lead.ran) return void this.writes.settled(plan.key);
        answered = true;
        this.serveSettled(plan, result.value, xCacheFor(result.status), exchange);
      },
      (error: unknown) => {
        if (lead.ran) return void this.writes.settled(plan.key);
        // A closed cache (shutting down) still lets the app answer.
        if (error instanceof CacheClosedError) exchange.proceed(undefined);
        else exchange.fail(error);
      },
    );
  }

  /**
   * Whether a hit for the plan may be answered as `resolve` would answer it without calling it:
   * from process memory at once (`peek`: the in-process store, or the L1 in front of Redis), or
   * with one read of a response seen fresh in Redis. Not while a tracer listens (its spans come
   * from `resolve`), nor with an early refresh a hit may start.
   */
  private hitsWithoutResolve(plan: CachePlan): boolean {
    if (httpChannel.hasSubscribers || getOrComputeChannel.hasSubscribers) return false;
    const early = plan.freshness.earlyRefresh;
    return early === undefined ? this.cache.options.freshness.earlyRefreshBeta === 0 : early === false;
  }

  /** The value process memory holds fresh under the plan's key, read at once when `hitsWithoutResolve`; else undefined. */
  private valueAtOnce(plan: CachePlan): unknown {
    return this.hitsWithoutResolve(plan) ? this.cache.peek(plan.key) : undefined;
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

  /** `serveValue` for a value a cache call settled with: what it throws goes to `exchange.fail`. */
  private serveSettled(plan: CachePlan, value: unknown, xCache: XCache, exchange: Exchange): void {
    try {
      this.serveValue(plan, value, xCache, exchange);
    } catch (error) {
      exchange.fail(error);
    }
  }

  private serveValue(plan: CachePlan, value: unknown, xCache: XCache, exchange: Exchange): void {
    const known = this.decoded.known(value, plan.key);
    const record = plan.record === undefined && known === undefined ? toVaryRecord(value) : undefined;
    if (record !== undefined) {
      // The URL's responses vary: look up this request's variant.
      this.handle({ ...plan, record, key: variantKey(plan.base, record, plan.headers) }, exchange);
      return;
    }
    const stored = known ?? this.decoded.decodeNew(value, plan.key);
    // Not a stored response (something else wrote this key), or a stale one whose refresh here
    // was just answered with a response that may not be stored: let the app answer.
    if (stored === undefined || (xCache === 'STALE' && this.writes.refused(plan.key))) {
      exchange.proceed(undefined);
      return;
    }
    if (!varyMatches(stored, plan.headers)) {
      this.varyMismatch(plan, stored, exchange);
      return;
    }
    // How long it has been stored, on the cache's clock (the one it was stored on).
    const cache = this.cache;
    const now = cache.now();
    const remaining = remainingFreshness(stored, now);
    const reuse = reuseOf(stored, remaining, xCache, !answersOnly(plan, exchange), plan.freshness, cache.options.freshness);
    if (reuse === 'handler') return exchange.proceed(undefined);
    if (reuse === 'revalidate') return this.revalidate(plan, stored, exchange);
    xCache = reuse;
    if (xCache === 'HIT' && asksPlainly(plan)) {
      exchange.serve(plainHit(stored, remaining, now, this.hitMember));
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
    const record: VaryRecord = { names, gen: plan.record?.gen ?? this.writes.generationFor(plan.base, names) };
    // Made up here, not read from the store: the one that stores a response under it checks the store first.
    this.handle({ ...plan, record, madeUpRecord: plan.record === undefined, key: variantKey(plan.base, record, plan.headers), retried: true }, exchange);
  }

  /**
   * The headers of the leader's response are about to be sent (this cache's own fields taken
   * off into `run`): its `Cache-Status` member (`leaderStatus`). `captured`: the adapter
   * captures this response to share it.
   */
  leaderHeaders(run: LeaderRun | undefined, status: number, headers: CapturedResponse['headers'], captured = true, bodySize?: number): string {
    if (run === undefined || !captured) return this.member({ fwd: 'miss' });
    return this.member(leaderStatus(run, status, headers, this.storeRules(), Date.now(), captured, bodySize));
  }

  /**
   * The handler's response to a refresh is an origin failure (a 500, 502, 503 or 504, the
   * framework's answer to a handler that threw included): the stored response its client gets
   * instead when its own `stale-if-error` window, else the route's `staleIfError`, allows it
   * (RFC 5861 §4), never one that forbids serving stale; else undefined. The adapter then fails
   * the capture, so the requests waiting for this run are served the same stale response.
   */
  staleOnError(run: LeaderRun, status: number): PreparedResponse | undefined {
    const cache = this.cache;
    const window = routeWindow(run.plan.freshness, cache.options.freshness, 'staleIfError');
    return staleInsteadOf(status, run.fallback, cache.now(), window, run.conditional, run.plan.head ? 'HEAD' : 'GET', this.hitMember);
  }

  /**
   * Whether a refresh of this plan's stored response runs detached from its client, through the
   * adapter's `replay`: the `refresh` option says so, the adapter can, the request is a GET or
   * a HEAD that runs as one, and the pipeline can name every header the key depends on (a `key`
   * function needs `replayHeaders`).
   */
  private refreshesInBackground(plan: CachePlan, exchange: Exchange): exchange is Exchange & { replay: Replay } {
    if (this.options.refresh !== 'background' || exchange.replay === undefined) return false;
    if (answersOnly(plan, exchange)) return false;
    return !plan.userKey || this.options.replayHeaders !== undefined;
  }
}
