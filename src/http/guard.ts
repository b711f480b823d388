import type { IncomingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import type { CacheDecision, DogpileCache } from '../core/cache.js';
import { getDefaultCache } from '../core/default-cache.js';
import { httpChannel, traceHttp } from '../shared/diagnostics.js';
import { CacheClosedError, InvalidOptionError } from '../shared/errors.js';
import { describe } from '../shared/duration.js';
import { KEY_HINTS_MAX_BYTES, keyHintSize } from '../shared/key-hints.js';
import { varyKeySuffix } from './cache-key.js';
import { responseNotStorableReason } from './cacheability.js';
import { ResponseCapture, type CapturedResponse } from './capture.js';
import { headerValue, parseVary, storableHeaders } from './headers.js';
import { resolveHttpCacheOptions, type HttpCacheOptions, type ResolvedHttpCacheOptions } from './options.js';
import { cacheableRequest, requestBaseKey, RequestClaims, withVary } from './request-plan.js';
import { encodeResponse } from './response-format.js';
import { prepareResponse, toServable, varyMatches, xCacheFor, type PreparedResponse, type ServableResponse } from './serve.js';

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
  /** The key without the `Vary` part. */
  base: string;
  key: string;
  ttl: number;
  headers: IncomingHttpHeaders;
  varyNames: readonly string[];
  retried: boolean;
}

/** What an adapter does for the guard; each call happens at most once per request. */
export interface Exchange {
  /**
   * Let the framework run the route handler for this request (`X-Cache: MISS`). With a
   * `capture`, the adapter feeds it the response the handler sends: the requests waiting for
   * this one are served from it.
   */
  proceed(capture: ResponseCapture | undefined): void;
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

const decide = (value: Buffer | null): CacheDecision => (value === null ? 'private' : 'store');

/**
 * The framework-neutral part of the HTTP adapters: which requests and responses may be
 * cached, the key, the lead/wait flow over `DogpileCache.resolve`, and what to write back.
 * An adapter turns its request into `HttpRequestInfo`, calls `plan()` then `handle()`, and
 * implements `Exchange`.
 */
export class HttpGuard<Req> {
  readonly options: ResolvedHttpCacheOptions<Req>;
  /** Base key → request header names its responses vary on (learnt from stored responses). */
  private readonly varyIndex = new LRUCache<string, readonly string[]>({
    max: 10_000,
    maxSize: KEY_HINTS_MAX_BYTES,
    sizeCalculation: (names, base) => keyHintSize(base) + names.reduce((n, name) => n + keyHintSize(name), 0),
  });
  private readonly pending = new Set<ResponseCapture>();

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
  plan(req: Req, info: HttpRequestInfo, marker: object, ttl: number = this.options.ttl): CachePlan | undefined {
    const { method, headers } = info;
    if (method !== 'GET' && method !== 'HEAD') return undefined;
    if (handled.has(marker)) return undefined;
    const { key: keyFn, skip } = this.options;
    if (skip !== undefined && skip(req)) return undefined;
    if (!cacheableRequest(method, headers, keyFn === undefined ? this.options.privateHeaders : [])) return undefined;
    let userKey: string | undefined;
    if (keyFn !== undefined) {
      const k = keyFn(req);
      if (!k) return undefined;
      if (typeof k !== 'string') throw new InvalidOptionError('key', `must return a string (or a falsy value to skip the cache), got ${describe(k)}`);
      userKey = k;
    }
    const base = requestBaseKey(method, info.url, headers, userKey);
    handled.claim(marker);
    const varyNames = this.varyIndex.get(base) ?? [];
    return {
      head: method === 'HEAD',
      base,
      key: withVary(base, varyNames, headers),
      ttl,
      headers,
      varyNames,
      retried: false,
    };
  }

  /** Serves, waits or leads. Never throws; errors go to `exchange.fail`. */
  handle(plan: CachePlan, exchange: Exchange): void {
    try {
      if (plan.head && exchange.headAsGet !== true) this.handleHead(plan, exchange);
      else this.handleGet(plan, exchange);
    } catch (error) {
      exchange.fail(error);
    }
  }

  /** Abandons every capture still in progress (one waiter leads instead): for shutdown. */
  abandonPending(): void {
    for (const capture of [...this.pending]) capture.abandon();
  }

  private handleGet(plan: CachePlan, exchange: Exchange): void {
    let ran = false;
    const loader = (): Promise<Buffer | null> => {
      ran = true;
      const capture = new ResponseCapture(
        this.options.maxBodySize,
        (response) => this.finish(plan, response),
        (c) => this.pending.delete(c),
        this.cache.options.waitTimeout,
      );
      this.pending.add(capture);
      // The handler must produce the full response for the others, not a 304 for this client's copy.
      delete plan.headers['if-none-match'];
      delete plan.headers['if-modified-since'];
      try {
        exchange.proceed(capture);
      } catch (error) {
        capture.share(null);
        exchange.fail(error);
      }
      return capture.promise;
    };
    const resolve = () => this.cache.resolve(plan.key, loader, { ttl: plan.ttl, cacheable: decide, onWaitTimeout: 'load', hitForMissTtl: this.options.hitForMissTtl });
    (httpChannel.hasSubscribers ? traceHttp(plan.key, plan.head ? 'HEAD' : 'GET', resolve) : resolve()).then(
      (result) => {
        // When the loader ran for this request, its handler has answered it already.
        if (ran) return;
        try {
          this.serveValue(plan, result.value, xCacheFor(result.status), exchange);
        } catch (error) {
          exchange.fail(error);
        }
      },
      (error: unknown) => {
        if (ran) return;
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

  private serveValue(plan: CachePlan, value: unknown, xCache: 'HIT' | 'COALESCED' | 'MISS', exchange: Exchange): void {
    const stored = toServable(value);
    // Not a stored response (something else wrote this key): let the app answer.
    if (stored === undefined) {
      exchange.proceed(undefined);
      return;
    }
    if (!varyMatches(stored, plan.headers)) {
      this.varyMismatch(plan, stored, exchange);
      return;
    }
    exchange.serve(prepareResponse(stored, plan.headers, xCache));
  }

  /**
   * The response varies on request headers that are not in this key yet: remember them for
   * this URL, and look up again under the key that includes them (once).
   */
  private varyMismatch(plan: CachePlan, stored: ServableResponse, exchange: Exchange): void {
    const names = [...new Set([...plan.varyNames, ...stored.vary.map(([name]) => name)])].sort();
    this.varyIndex.set(plan.base, names);
    if (plan.retried) {
      exchange.proceed(undefined);
      return;
    }
    this.handle({ ...plan, varyNames: names, key: plan.base + varyKeySuffix(names, plan.headers), retried: true }, exchange);
  }

  /** The leader's response is complete: the bytes to store and share, or null to share nothing. */
  private finish(plan: CachePlan, response: CapturedResponse): Buffer | null {
    if (responseNotStorableReason(response, this.options.statuses) !== undefined) return null;
    const vary = parseVary(headerValue(response.headers, 'vary'));
    if (vary === '*') return null;
    return encodeResponse({
      createdAt: Date.now(),
      status: response.status,
      headers: storableHeaders(response.headers),
      vary: vary.map((name) => [name, headerValue(plan.headers, name)] as const),
      body: response.body,
    });
  }
}
