import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { HttpGuard } from '../http/guard.js';
import type { OutgoingHttpHeaders } from 'node:http';
import { beforeHeaders, captureServerResponse, isRepresentationHeader } from '../http/capture.js';
import { takeTagsField, takeTargetedField } from '../http/targeted-fields.js';
import { appendCacheStatus } from '../http/cache-status.js';
import { writeServerResponse } from '../http/serve.js';
import type { HttpCacheOptions } from '../http/options.js';
import { LoaderError } from '../shared/errors.js';
import type { Replay } from '../http/pipeline.js';
import { expressReplay, isReplay, type ExpressLikeApp } from '../http/node-replay.js';

export { HTTP_CACHE_DEFAULTS } from '../http/options.js';

/** Options of `dogpileGuard()`; see `HttpCacheOptions` for each one and its default. */
export type DogpileGuardOptions = HttpCacheOptions<Request>;

/**
 * Express middleware that caches GET responses and coalesces concurrent misses: one request
 * runs the route handler, every other request for the same resource (in this process, or in
 * any process sharing the cache's Redis) waits and is sent that response.
 *
 * ```ts
 * app.use(dogpileGuard({ cache, ttl: '30s' }));                 // app-wide
 * app.get('/report', dogpileGuard({ ttl: '5m' }), handler);     // one route
 * ```
 *
 * Responses say `X-Cache: MISS | HIT | COALESCED | STALE` (and `Age` when served from the cache).
 * Use it either app-wide or on a route, not both for the same request: the first one wins.
 */
export function dogpileGuard(options?: DogpileGuardOptions): RequestHandler {
  const guard = new HttpGuard<Request>(options);
  /** Background refreshes, by app: run through the whole app with a synthetic request. */
  const replays = new WeakMap<object, Replay>();
  const replayFor = (app: ExpressLikeApp): Replay => {
    let replay = replays.get(app);
    if (replay === undefined) replays.set(app, (replay = expressReplay(app)));
    return replay;
  };
  return function dogpileGuardMiddleware(req: Request, res: Response, next: NextFunction): void {
    // A background refresh: the handler answers it, and the refresh reads its response.
    if (isReplay(req)) {
      next();
      return;
    }
    let plan;
    try {
      plan = guard.plan(req, { method: req.method, url: req.originalUrl, headers: req.headers }, req);
    } catch (error) {
      next(error);
      return;
    }
    if (plan === undefined) {
      // Another guard (app-wide and on the route) handles this request: it does all of this.
      if (HttpGuard.claimed(req)) {
        next();
        return;
      }
      if (HttpGuard.unsafe(req.method)) invalidateBeforeEnd(guard, req, res);
      const bypass = guard.bypassStatus({ method: req.method, url: req.originalUrl, headers: req.headers });
      // Dogpile-* fields never leave the server, whatever the request (beforeHeaders drops them).
      beforeHeaders(res, () => {
        if (bypass !== undefined) res.setHeader('cache-status', bypass);
      });
      next();
      return;
    }
    guard.handle(plan, {
      // On a route with its own HEAD handler, a HEAD runs that handler.
      headAsGet: (req.route as { methods?: Record<string, boolean> } | undefined)?.methods?.head !== true,
      replay: replayFor(req.app as unknown as ExpressLikeApp),
      proceed(capture, active = plan) {
        res.setHeader('x-cache', 'MISS');
        if (capture) captureServerResponse(res, capture);
        let storedBody: Buffer | undefined;
        let replaced = false;
        if (capture && (active.revalidating || active.fallback)) {
          // A 304 from the handler is turned into the stored response (below), and so is an
          // origin failure that the stored one may stand in for: its body goes out instead of
          // the handler's, whose pieces are dropped. Headers are settled first, for the decision.
          const write = res.write as (...args: unknown[]) => boolean;
          (res as unknown as { write: (...args: unknown[]) => boolean }).write = function (this: Response, ...args: unknown[]): boolean {
            if (!res.headersSent) res.writeHead(res.statusCode);
            if (!replaced) return write.apply(this, args);
            const callback = args.find((arg) => typeof arg === 'function') as (() => void) | undefined;
            if (callback) process.nextTick(callback);
            return true;
          };
          const end = res.end as (...args: unknown[]) => unknown;
          (res as unknown as { end: (...args: unknown[]) => unknown }).end = function (this: Response, ...args: unknown[]): unknown {
            if (!res.headersSent) res.writeHead(res.statusCode);
            if (storedBody === undefined) return end.apply(this, args);
            const body = storedBody;
            storedBody = undefined;
            return end.call(this, body);
          };
        }
        // Installed after the capture, so it runs first: the capture sees the headers as sent.
        beforeHeaders(res, (status) => {
          const targeted = takeTargetedField(res);
          const tagged = takeTagsField(res);
          if (tagged !== undefined) active.tagged = tagged;
          const stale = capture ? guard.staleOnError(active, status) : undefined;
          if (capture && stale) {
            // The origin failed: its client gets the stored response it allows (stale-if-error),
            // and so do the requests waiting for this run (the capture fails as a loader would).
            for (const name of res.getHeaderNames()) res.removeHeader(name);
            for (const [name, value] of stale.headers) res.setHeader(name, value);
            res.setHeader('x-cache', stale.xCache);
            res.setHeader('age', String(stale.age));
            res.setHeader('cache-status', stale.cacheStatus);
            capture.fail(new LoaderError(`the handler answered ${status}; the stored response was served instead`, { key: active.key }));
            storedBody = stale.body ?? Buffer.alloc(0);
            replaced = true;
            return stale.status;
          }
          const renewed = capture ? guard.revalidated304(active, status, res.getHeaders()) : undefined;
          if (capture && renewed) {
            // The handler confirmed the stored response: its client gets that, renewed.
            const keep = new Set(['x-cache']);
            for (const name of res.getHeaderNames()) if (!keep.has(name)) res.removeHeader(name);
            for (const [name, value] of Object.entries(renewed.headers)) res.setHeader(name, value);
            res.setHeader('cache-status', guard.leaderHeaders(active, status, res.getHeaders(), targeted));
            capture.original = { status: 304, headers: {} };
            storedBody = renewed.body;
            return renewed.status;
          }
          const member = guard.leaderHeaders(active, status, res.getHeaders(), targeted, capture !== undefined);
          res.setHeader('cache-status', appendCacheStatus(res.getHeader('cache-status') as string | string[] | undefined, member));
          if (capture === undefined || !guard.leaderNotModified(active, status, res.getHeaders())) return undefined;
          // This client's conditional request is answered with a 304; the full response is
          // still captured and stored.
          const removed: OutgoingHttpHeaders = {};
          for (const name of res.getHeaderNames()) {
            if (!isRepresentationHeader(name)) continue;
            removed[name] = res.getHeader(name);
            res.removeHeader(name);
          }
          capture.original = { status, headers: removed };
          return 304;
        });
        if (capture && req.method === 'HEAD') runAsGet(req, res);
        next();
      },
      serve(response) {
        writeServerResponse(res, response);
      },
      fail(error) {
        next(error);
      },
    });
  };
}

/**
 * A write (POST, PUT, PATCH, DELETE...): once its handler ends a successful response, the
 * stored responses it invalidates are deleted before the response is sent on, so that the
 * client's next GET does not find them.
 */
function invalidateBeforeEnd(guard: HttpGuard<Request>, req: Request, res: Response): void {
  const end = res.end as (...args: unknown[]) => unknown;
  const info = { method: req.method, url: req.originalUrl, headers: req.headers };
  (res as unknown as { end: (...args: unknown[]) => unknown }).end = function (this: Response, ...args: unknown[]): unknown {
    if (res.statusCode < 200 || res.statusCode > 399 || res.headersSent) {
      // Nothing to do, or headers already gone: invalidate without holding the response.
      if (res.statusCode >= 200 && res.statusCode <= 399) void guard.invalidate(info, res.statusCode, res.getHeaders(), req);
      return end.apply(this, args);
    }
    void guard.invalidate(info, res.statusCode, res.getHeaders(), req).then(() => end.apply(this, args));
    return this;
  };
}

/**
 * Lets the handler of a HEAD request that leads produce the full GET response, so that it can
 * be stored (`res.send` leaves the body out when `req.method` is HEAD). Node's response still
 * knows the request was HEAD and sends no body. `req.method` is HEAD again once the response ends.
 */
function runAsGet(req: Request, res: Response): void {
  req.method = 'GET';
  const end = res.end as (...args: unknown[]) => unknown;
  (res as unknown as { end: (...args: unknown[]) => unknown }).end = function (this: Response, ...args: unknown[]): unknown {
    req.method = 'HEAD';
    return end.apply(this, args);
  };
}
