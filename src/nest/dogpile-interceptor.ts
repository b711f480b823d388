import type { IncomingHttpHeaders } from 'node:http';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { defer, tap, type Observable } from 'rxjs';
import type { CacheDecision, CacheResult, DogpileCache, LoaderContext } from '../core/cache.js';
import { getDefaultCache } from '../core/default-cache.js';
import { resolveResponse } from '../http/flow/cache-calls.js';
import type { FreshnessOptions } from '../core/freshness.js';
import { userCacheKey } from '../http/rules/cache-key.js';
import { cacheableRequest, requestBaseKey, RequestClaims } from '../http/flow/request-plan.js';
import { xCacheFor, type XCache } from '../http/flow/serve.js';
import { refreshOnceAnswered, replayRequest } from '../http/flow/background-refresh.js';
import { takeOwnFields, valueInstructions, valueKey, type OwnFields } from '../http/flow/value-answer.js';
import { decide, decisionOf, firstValue, HandlerError, handlerValue, lostClass, type AnyResponse } from './handler-value.js';
import { CACHED_METADATA, DOGPILE_CACHE, DOGPILE_DEFAULTS } from './constants.js';
import { checkKey, mergeCachedOptions, NEST_DEFAULTS, tagsFor, ttlFor, type DogpileDefaults, type ResolvedCachedOptions } from './options.js';
import { handlerFacts, headerRules } from './route-facts.js';
import { NestReplays, type ReplayOutcome } from './replay.js';
import type { ReplayRequest } from '../http/pipeline.js';

type Fn = (...args: any[]) => unknown;

/** The parts of an Express `Request` or a Fastify `FastifyRequest` the interceptor reads. */
interface AnyRequest {
  method: string;
  url: string;
  originalUrl?: string;
  raw?: { url?: string };
  headers: IncomingHttpHeaders;
}

/** Requests (or, outside HTTP, argument lists) one DogpileInterceptor already handles. */
const handled = new RequestClaims('nest-handled');

/**
 * Caches the value a route handler returns (a value, a Promise or the first value of an
 * Observable) in the module's `DogpileCache`, and runs the handler once for all concurrent
 * misses of a key — in this process, and in every process sharing the cache's Redis.
 *
 * Requests are keyed and filtered by the same rules as the Express and Fastify adapters:
 * GET and HEAD only (HEAD shares the GET entry), method + host + path + sorted query; requests
 * with an invalid `Host` or a body passed through; requests with one of the `privateHeaders`
 * (`Authorization`, `Cookie` by default) passed through unless a `key` function is given (it
 * must then include the identity). Responses say `X-Cache: MISS | HIT | COALESCED` and, when served
 * from another run, `Age`.
 *
 * Left alone (the handler runs as if there were no cache):
 * - handlers that take `@Res()` or `@Next()`: they write the response themselves, so their
 *   return value is not the whole response (a warning is logged once per handler);
 * - `@Sse()` handlers (a stream of events, not one value);
 * - routes whose `@Header()`s say `Set-Cookie`, `Cache-Control: private | no-store | no-cache`
 *   or `Vary: *`;
 * - `StreamableFile` and stream results: sent to their own request only; concurrent requests
 *   run their own handler.
 *
 * The response's own headers decide whether and how long its value is kept, as in the
 * adapters (`valueDecision`); `Dogpile-Cache-Control` is taken off before it is sent.
 *
 * Errors thrown by the handler are never cached; they reach the client as Nest sends them.
 * Requests waiting in the same process get the same error; requests waiting in another
 * process run the handler again there (once per process), so each gets a real exception for
 * Nest's exception filters rather than a copy.
 *
 * Values are stored with the cache's serializer (v8 by default): class instances come back
 * as plain objects (a warning is logged once per handler that returns one). Interceptors
 * that depend on the class (`ClassSerializerInterceptor` with `@Exclude()`) must run inside
 * this one — bound on the method, written above `@Cached()` — or return plain data.
 *
 * Extend it and override `trackBy()` to change the key (return `undefined` to skip the
 * cache), as with `@nestjs/cache-manager`'s `CacheInterceptor`.
 */
@Injectable()
export class DogpileInterceptor implements NestInterceptor {
  protected readonly logger = new Logger('DogpileInterceptor');
  protected readonly defaults: DogpileDefaults;
  private readonly givenCache: DogpileCache | undefined;
  private readonly optionsMemo = new WeakMap<object, WeakMap<Fn, ResolvedCachedOptions>>();
  private readonly warned = new WeakSet<Fn>();
  private readonly classWarned = new WeakSet<Fn>();
  /** Background refreshes, run through the platform's app. */
  private readonly replays = new NestReplays(() => this.adapterHost?.httpAdapter?.getInstance());

  constructor(
    @Inject(Reflector) protected readonly reflector: Reflector,
    @Optional() @Inject(DOGPILE_CACHE) cache?: DogpileCache,
    @Optional() @Inject(DOGPILE_DEFAULTS) defaults?: DogpileDefaults,
    @Optional() @Inject(HttpAdapterHost) protected readonly adapterHost?: HttpAdapterHost,
  ) {
    this.givenCache = cache;
    this.defaults = defaults ?? { ttl: NEST_DEFAULTS.ttl, privateHeaders: NEST_DEFAULTS.privateHeaders };
  }

  /** The module's cache; without `DogpileModule`, the default (in-process) cache. */
  protected get cache(): DogpileCache {
    return this.givenCache ?? getDefaultCache();
  }

  /** The cache a handler's values live in: the module's, or its namespace named by `@Cached({ namespace })`. */
  protected cacheFor(context: ExecutionContext): DogpileCache {
    const { namespace } = this.optionsFor(context);
    return namespace === undefined ? this.cache : this.cache.namespace(namespace);
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const http = context.getType() === 'http';
    let marker: object;
    let vary: string[] = [];
    let headers: IncomingHttpHeaders | undefined;
    let taken: OwnFields = {};
    let routeStatus: number | undefined;
    let pass = (): Observable<unknown> => next.handle();
    if (http) {
      const facts = handlerFacts(context.getClass(), context.getHandler() as Fn);
      if (facts.skip !== undefined) {
        this.warnSkipped(context, facts.skip);
        return next.handle();
      }
      // Dogpile-Cache-Control is read by this cache only: it never leaves the server, whether
      // a @Header() set it (Nest sets those before any interceptor runs) or the handler did.
      const response = context.switchToHttp().getResponse<AnyResponse>();
      taken = takeOwnFields(response);
      // Nest sets the route's status (`@HttpCode()`) before any interceptor runs.
      routeStatus = typeof response.statusCode === 'number' ? response.statusCode : undefined;
      pass = () => next.handle().pipe(tap(() => void takeOwnFields(response)));
      const req = context.switchToHttp().getRequest<AnyRequest>();
      // A background refresh of this interceptor: the handler answers it, and the refresh takes its value.
      const sink = this.replays.take(req.headers);
      if (sink !== undefined) return this.replayed(context, next, sink, taken, routeStatus);
      // GET and HEAD only, with a well-formed Host and no body, whatever trackBy() says.
      if (!cacheableRequest(req.method, req.headers, [])) return pass();
      marker = (req as { raw?: object }).raw ?? req;
      if (handled.has(marker)) return pass();
      const rules = headerRules(facts);
      if (rules.notStorable !== undefined) return pass();
      vary = rules.vary;
      headers = req.headers;
    } else {
      marker = context.getArgs();
      if (handled.has(marker)) return next.handle();
    }

    const tracked = await this.trackBy(context);
    if (!tracked || typeof tracked !== 'string') return pass();
    const key = valueKey(tracked, headers === undefined ? undefined : { vary, headers });
    const ttl = await ttlFor(this.optionsFor(context), this.defaults, context);
    // A second DogpileInterceptor on the same request (@Cached on the class and the handler,
    // or also bound globally) lets it through: the first one handles it.
    handled.claim(marker);
    const tags = await tagsFor(this.optionsFor(context).tags, context);
    const freshness = this.optionsFor(context).freshness ?? {};
    const replay = http ? this.replayFor(context, vary) : undefined;
    return defer(() => this.answer(context, next, key, { ttl, freshness, tags, taken, routeStatus, replay }));
  }

  /**
   * The request a background refresh of this route would run with, or undefined when its
   * refreshes run in the foreground (the `refresh` option, a HEAD, no HTTP platform, or a key
   * from a `key` function or a `trackBy()` override without `replayHeaders`).
   */
  private replayFor(context: ExecutionContext, vary: readonly string[]): ReplayRequest | undefined {
    if (this.defaults.refresh === 'foreground' || this.adapterHost?.httpAdapter === undefined) return undefined;
    const req = context.switchToHttp().getRequest<AnyRequest>();
    if (req.method !== 'GET') return undefined;
    const defaultKey = this.optionsFor(context).key === undefined && this.trackBy === DogpileInterceptor.prototype.trackBy;
    if (!defaultKey && this.defaults.replayHeaders === undefined) return undefined;
    return replayRequest({ url: req.originalUrl ?? req.raw?.url ?? req.url, headers: req.headers, defaultKey, replayHeaders: [...vary, ...(this.defaults.replayHeaders ?? [])] });
  }

  /** A request injected for a background refresh: the handler runs, and its value (or error) goes to the refresh. */
  private async replayed(context: ExecutionContext, next: CallHandler, sink: (outcome: ReplayOutcome) => void, taken: OwnFields, routeStatus: number | undefined): Promise<Observable<unknown>> {
    const options = this.optionsFor(context);
    const ttl = await ttlFor(options, this.defaults, context);
    const tags = await tagsFor(options.tags, context);
    return defer(async () => {
      try {
        const value = await firstValue(next.handle());
        sink({ value, decision: decisionOf(context, { ttl, tags, status: routeStatus }, taken) });
        return value;
      } catch (error) {
        sink({ error });
        throw error;
      }
    });
  }

  /**
   * The cache key of a request, or `undefined` to let it through uncached. The default: the
   * route's `key` function (from `@Cached`, namespaced) or method + host + path + sorted query;
   * `undefined` for requests that carry one of the `privateHeaders` (`Authorization`, `Cookie`
   * by default) unless there is a `key` function. A key you return from an override is namespaced like the `key` option's.
   * Non-HTTP contexts (microservices, WebSockets, GraphQL) are cached only with a `key`.
   */
  protected async trackBy(context: ExecutionContext): Promise<string | undefined> {
    const { key } = this.optionsFor(context);
    if (context.getType() !== 'http') {
      if (key === undefined) return undefined;
      const k = checkKey(await key(context));
      return k === undefined ? undefined : userCacheKey(k);
    }
    const req = context.switchToHttp().getRequest<AnyRequest>();
    const { privateHeaders = this.defaults.privateHeaders ?? NEST_DEFAULTS.privateHeaders } = this.optionsFor(context);
    if (!cacheableRequest(req.method, req.headers, key === undefined ? privateHeaders : [])) return undefined;
    if (key === undefined) return requestBaseKey(req.method, req.originalUrl ?? req.raw?.url ?? req.url, req.headers, undefined);
    const k = checkKey(await key(context));
    return k === undefined ? undefined : userCacheKey(k);
  }

  /** The `@Cached` options of the handler, over those of its class (memoised). */
  protected optionsFor(context: ExecutionContext): ResolvedCachedOptions {
    const cls = context.getClass();
    const handler = context.getHandler() as Fn;
    let perClass = this.optionsMemo.get(cls);
    if (!perClass) {
      perClass = new WeakMap();
      this.optionsMemo.set(cls, perClass);
    }
    let options = perClass.get(handler);
    if (!options) {
      options = mergeCachedOptions(
        this.reflector.get<ResolvedCachedOptions | undefined>(CACHED_METADATA, cls),
        this.reflector.get<ResolvedCachedOptions | undefined>(CACHED_METADATA, handler),
      );
      perClass.set(handler, options);
    }
    return options;
  }

  private async answer(
    context: ExecutionContext,
    next: CallHandler,
    key: string,
    call: { ttl: number; freshness: FreshnessOptions; tags: readonly string[] | undefined; taken: OwnFields; routeStatus?: number | undefined; replay?: ReplayRequest | undefined },
  ): Promise<unknown> {
    const { ttl, freshness, tags, replay } = call;
    let ran = false;
    let produced: { value: unknown } | undefined;
    /** What the response the handler produced says about storing its value (HTTP only). */
    let decision: CacheDecision | undefined;
    /** This request has been answered from the cache: a run of the loader now is detached from it. */
    let answered = false;
    const detached = async (ctx: LoaderContext, stale: unknown, request: ReplayRequest): Promise<unknown> => {
      const outcome = await this.replays.run(request);
      // Refused in front of the handler (a guard): nothing is stored, the stale value is dropped.
      if (outcome === undefined) {
        ctx.decide('private');
        await this.cacheFor(context).delete(key).catch(() => false);
        return stale;
      }
      if ('error' in outcome) throw new HandlerError(outcome.error);
      decision = outcome.decision;
      return outcome.value;
    };
    const foreground = async (): Promise<unknown> => {
      ran = true;
      const value = await handlerValue(next.handle());
      produced = { value };
      if (context.getType() === 'http') decision = decisionOf(context, { ttl, tags, status: call.routeStatus }, call.taken);
      return value;
    };
    const loader = (ctx: LoaderContext): Promise<unknown> => {
      if (ctx.stale === undefined || replay === undefined) return foreground();
      const stale = ctx.stale.value;
      return refreshOnceAnswered(() => answered, () => detached(ctx, stale, replay), foreground);
    };
    const cacheable = (value: unknown): CacheDecision => {
      const own = decide(value);
      return own === 'store' && decision !== undefined ? decision : own;
    };
    let result: CacheResult<unknown>;
    try {
      // A handler that failed in another process runs again here, once per key for the
      // requests of this process (onRemoteError), so each gets a real exception for Nest.
      // A stale value inside staleWhileRevalidate: the request that wins the refresh lead runs
      // the handler (X-Cache: MISS); every other one is answered stale at once (X-Cache: STALE).
      const options = {
        ttl,
        ...(tags === undefined ? {} : { tags }),
        cacheable,
        onWaitTimeout: 'load' as const,
        onRemoteError: 'load' as const,
        ...freshness,
      };
      result = await resolveResponse(this.cacheFor(context), key, loader, options, replay === undefined);
      answered = !ran;
    } catch (error) {
      // The handler failed here (this request's run, or the one it waited for in this process).
      if (error instanceof HandlerError) throw error.error;
      // The handler ran but its value could not be stored (e.g. not serialisable): send it anyway.
      if (produced !== undefined) {
        this.setXCache(context, 'MISS');
        return produced.value;
      }
      if (ran) throw error;
      // The cache cannot be used (closed while shutting down, ...): the app still answers.
      this.setXCache(context, 'MISS');
      return firstValue(next.handle());
    }
    const fromCache = result.status === 'hit' || result.status === 'coalesced' || result.status === 'stale';
    this.setXCache(context, xCacheFor(result.status), fromCache ? result.createdAt : undefined, ttl);
    if (produced !== undefined && result.status === 'miss') this.warnClassInstance(context, produced.value);
    return result.value;
  }

  private setXCache(context: ExecutionContext, xCache: XCache, createdAt?: number, ttl?: number): void {
    if (context.getType() !== 'http') return;
    const res = context.switchToHttp().getResponse<Record<string, unknown>>();
    if (res.headersSent === true || res.sent === true) return;
    for (const [name, value] of valueInstructions(xCache, this.cache.now(), createdAt, ttl)) this.setHeader(res, name, value);
  }

  private setHeader(res: Record<string, unknown>, name: string, value: string): void {
    const adapter = this.adapterHost?.httpAdapter;
    if (adapter) adapter.setHeader(res, name, value);
    else if (typeof res.header === 'function') (res.header as Fn).call(res, name, value);
    else if (typeof res.setHeader === 'function') (res.setHeader as Fn).call(res, name, value);
  }

  /**
   * Once per handler: its value is a class instance, and the copies served from the cache
   * are plain objects. Interceptors outside this one that depend on the class (a global
   * `ClassSerializerInterceptor` honouring `@Exclude()`) would treat a hit differently from
   * the miss — e.g. send a field the miss left out.
   */
  private warnClassInstance(context: ExecutionContext, value: unknown): void {
    const handler = context.getHandler() as Fn;
    if (this.classWarned.has(handler)) return;
    const name = lostClass(value);
    if (name === undefined) return;
    this.classWarned.add(handler);
    this.logger.warn(
      `${context.getClass().name}.${handler.name} returned ${name} instance(s); responses served from the cache are plain objects ` +
        '(the class is not stored), so class-based serialization outside @Cached (a global ClassSerializerInterceptor, @Exclude()) ' +
        'does not apply to them. Return plain data, or bind @UseInterceptors(ClassSerializerInterceptor) on the method above @Cached().',
    );
  }

  private warnSkipped(context: ExecutionContext, reason: string): void {
    const handler = context.getHandler() as Fn;
    if (this.warned.has(handler)) return;
    this.warned.add(handler);
    const cls = context.getClass();
    const explicit =
      this.reflector.get(CACHED_METADATA, handler) !== undefined || this.reflector.get(CACHED_METADATA, cls) !== undefined;
    if (!explicit) return;
    this.logger.warn(
      `${cls.name}.${handler.name} is not cached: it uses ${reason}` +
        (reason === '@Sse()' ? '' : ', so it writes the response itself and its return value cannot stand in for it'),
    );
  }
}
