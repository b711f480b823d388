import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { HttpGuard } from '../http/guard.js';
import { captureServerResponse } from '../http/capture.js';
import { writeServerResponse } from '../http/serve.js';
import type { HttpCacheOptions } from '../http/options.js';

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
  return function dogpileGuardMiddleware(req: Request, res: Response, next: NextFunction): void {
    let plan;
    try {
      plan = guard.plan(req, { method: req.method, url: req.originalUrl, headers: req.headers }, req);
    } catch (error) {
      next(error);
      return;
    }
    if (plan === undefined) {
      next();
      return;
    }
    guard.handle(plan, {
      // On a route with its own HEAD handler, a HEAD runs that handler.
      headAsGet: (req.route as { methods?: Record<string, boolean> } | undefined)?.methods?.head !== true,
      proceed(capture) {
        res.setHeader('x-cache', 'MISS');
        if (capture) {
          captureServerResponse(res, capture);
          if (req.method === 'HEAD') runAsGet(req, res);
        }
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
