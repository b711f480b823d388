import { Inject, Injectable, Optional, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { of, type Observable } from 'rxjs';
import type { CacheResult } from '../../core/cache.js';
import { describe } from '../../shared/duration.js';
import { InvalidOptionError } from '../../shared/errors.js';
import { HTTP_CACHE_DEFAULTS } from '../../http/options.js';
import { xCacheFor } from '../../http/flow/serve.js';
import { valueInstructions } from '../../http/flow/value-answer.js';
import { decide, HandlerError, handlerValue } from '../handler-value.js';
import { handlerFacts } from '../route-facts.js';
import { CACHE_KEY_METADATA, CACHE_MANAGER, CACHE_TTL_METADATA } from './constants.js';
import type { CacheKeyFactory, CacheTTLFactory } from './decorators.js';
import { managedParts } from './managed-cache.js';
import { durationOrZero } from '../../shared/option-table.js';
import { lifetime } from './ttl.js';

type Fn = (...args: any[]) => unknown;

/** How each request was answered, for `setHeadersWhenHttp()`. */
const answers = new WeakMap<object, CacheResult<unknown>>();

/**
 * `@nestjs/cache-manager`'s `CacheInterceptor` on this library: caches the value a handler
 * returns under the request URL (or `@CacheKey()`), for `@CacheTTL()` or the module's `ttl`,
 * GET requests only (`allowedMethods`, `isRequestCacheable()`). Concurrent misses of a key run
 * the handler once, in this process and in every process sharing the cache's Redis; the
 * others are answered with its value. Bind it on a controller or a handler with
 * `@UseInterceptors(CacheInterceptor)`, or globally with `APP_INTERCEPTOR`. Extend it to
 * override `trackBy()` or `isRequestCacheable()`.
 *
 * Handler errors are never cached. Handlers that take `@Res()` / `@Next()` and `@Sse()`
 * handlers run as if there were no cache; `StreamableFile` and stream results are sent to
 * their own request only.
 */
@Injectable()
export class CacheInterceptor implements NestInterceptor {
  @Optional()
  @Inject(HttpAdapterHost)
  protected readonly httpAdapterHost!: HttpAdapterHost;

  /** Methods whose requests are cached by the default `isRequestCacheable()`. */
  protected allowedMethods = ['GET'];

  constructor(
    @Inject(CACHE_MANAGER) protected readonly cacheManager: any,
    @Inject(Reflector) protected readonly reflector: Reflector,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<any>> {
    if (context.getType() === 'http' && handlerFacts(context.getClass(), context.getHandler() as Fn).skip !== undefined) return next.handle();
    const key = await this.trackBy(context);
    if (!key) return next.handle();
    const parts = managedParts(this.cacheManager);
    if (parts === undefined) throw new InvalidOptionError('CACHE_MANAGER', `expected the cache of CacheModule from dogpile-guard/nest/cache-manager, got ${describe(this.cacheManager)}`);
    const ttlOrFactory =
      this.reflector.get<number | CacheTTLFactory | undefined>(CACHE_TTL_METADATA, context.getHandler()) ??
      this.reflector.get<number | CacheTTLFactory | undefined>(CACHE_TTL_METADATA, context.getClass());
    const given = typeof ttlOrFactory === 'function' ? await ttlOrFactory(context) : ttlOrFactory;
    const ttl = lifetime(given === undefined || given === null ? undefined : durationOrZero(given, 'ttl'), parts.defaults.ttl);

    let produced: { value: unknown } | undefined;
    const loader = async (): Promise<unknown> => {
      const value = await handlerValue(next.handle());
      produced = { value };
      return value;
    };
    let result: CacheResult<unknown>;
    try {
      // A handler that failed in another process runs again here (once per key for this
      // process's requests), so each request gets a real exception for Nest's filters.
      result = await parts.cache.resolve(String(key), loader, { ttl, cacheable: decide, onWaitTimeout: 'load', onRemoteError: 'load' });
    } catch (error) {
      if (error instanceof HandlerError) throw error.error;
      // The handler ran but its value could not be stored (not serialisable): send it anyway.
      if (produced !== undefined) return of(produced.value);
      // The cache cannot be used (closed while shutting down, ...): the app still answers.
      return next.handle();
    }
    if (context.getType() === 'http') answers.set(context.switchToHttp().getResponse<object>(), result);
    this.setHeadersWhenHttp(context, result.value);
    return of(result.value);
  }

  /**
   * The key of a request, or a falsy value to let it through uncached: the handler's
   * `@CacheKey()` (its value, or what its function returns) when it has one; otherwise, on
   * HTTP, the request URL when `isRequestCacheable()`; otherwise none.
   */
  protected trackBy(context: ExecutionContext): Promise<string | undefined | null> | string | undefined | null {
    const keyOrFactory = this.reflector.get<string | CacheKeyFactory | undefined>(CACHE_KEY_METADATA, context.getHandler());
    if (keyOrFactory !== undefined) return typeof keyOrFactory === 'function' ? keyOrFactory(context) : keyOrFactory;
    const httpAdapter = this.httpAdapterHost?.httpAdapter;
    if (context.getType() !== 'http' || httpAdapter === undefined) return undefined;
    if (!this.isRequestCacheable(context)) return undefined;
    return httpAdapter.getRequestUrl(context.getArgByIndex(0)) as string;
  }

  /**
   * Whether a request may be cached by its URL: its method is one of `allowedMethods` (GET),
   * and it carries no credentials (`Authorization`, `Cookie`: the HTTP adapters'
   * `privateHeaders`), since a URL key would serve one user's answer to another. Override
   * `trackBy()` with a key that includes the identity to cache such requests.
   */
  protected isRequestCacheable(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ method: string; headers?: Record<string, unknown> }>();
    if (!this.allowedMethods.includes(req.method)) return false;
    const headers = req.headers ?? {};
    return !HTTP_CACHE_DEFAULTS.privateHeaders.some((name) => headers[name] !== undefined);
  }

  /**
   * Tells the client how its request was answered, on HTTP: `X-Cache: MISS` (this request ran
   * the handler), `HIT`, `COALESCED` (another request's run, in this process or another) or
   * `STALE`, with `Age` and `Cache-Status` for a value from the cache.
   */
  protected setHeadersWhenHttp(context: ExecutionContext, value: any): void {
    const httpAdapter = this.httpAdapterHost?.httpAdapter;
    if (context.getType() !== 'http' || httpAdapter === undefined) return;
    const response = context.switchToHttp().getResponse<object>();
    const result = answers.get(response);
    const status = result?.status ?? (value === undefined || value === null ? 'miss' : 'hit');
    const parts = managedParts(this.cacheManager);
    const fromCache = status === 'hit' || status === 'coalesced' || status === 'stale';
    for (const [name, field] of valueInstructions(xCacheFor(status), parts?.cache.now() ?? Date.now(), fromCache ? result?.createdAt : undefined)) {
      httpAdapter.setHeader(response, name, field);
    }
  }
}
