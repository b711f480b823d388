import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { HttpGuard } from '../http/flow/guard.js';
import { leadOnServerResponse, passOnServerResponse, runAsGet, writeServerResponse } from '../http/exchange/node-exchange.js';
import { leaderHead } from '../http/flow/leader-answer.js';
import type { HttpCacheOptions } from '../http/options.js';
import type { Replay } from '../http/pipeline.js';
import type { Exchange, LeaderRun } from '../http/flow/plan-types.js';
import type { ResponseCapture } from '../http/flow/capture.js';
import { expressReplay, type ExpressLikeApp } from '../http/exchange/node-replay.js';
import type { PreparedResponse } from '../http/flow/serve.js';

export { HTTP_CACHE_DEFAULTS, type HttpCacheOptions } from '../http/options.js';

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
    // Each request property read once: on an Express request every read is costly.
    const info = { method: req.method, url: req.originalUrl, headers: req.headers };
    let plan;
    try {
      plan = guard.planUnclaimed(req, info, req);
    } catch (error) {
      next(error);
      return;
    }
    if (plan === undefined) {
      // Another guard (app-wide and on the route) handles this request: it does all of this. Or
      // it is a background refresh (claimed from the start): its handler answers it, and the
      // refresh reads the response.
      if (HttpGuard.claimed(req)) {
        next();
        return;
      }
      passOnServerResponse(res, guard.passing(info, req));
      next();
      return;
    }
    // On a route with its own HEAD handler, a HEAD runs that handler (a GET never reads it).
    const headAsGet = !plan.head || (req.route as { methods?: Record<string, boolean> } | undefined)?.methods?.head !== true;
    const hit = guard.hitAtOnce(plan, headAsGet);
    if (hit !== undefined) {
      writeServerResponse(res, hit);
      return;
    }
    guard.handle(plan, new ExpressExchange(guard, req, res, next, headAsGet, replayFor));
  };
}

/**
 * What the guard does with one Express request. A class: its methods and the `replay` getter sit
 * on the prototype, so a request costs one object of one shape. (An object literal with a getter
 * and four closures cost 15% more CPU per Redis hit: V8 builds such a literal through the
 * runtime, a new shape each time.)
 */
class ExpressExchange implements Exchange {
  constructor(
    private readonly guard: HttpGuard<Request>,
    private readonly req: Request,
    private readonly res: Response,
    private readonly next: NextFunction,
    readonly headAsGet: boolean,
    private readonly replayFor: (app: ExpressLikeApp) => Replay,
  ) {}

  /** Read only for a refresh in the background: a hit never touches `req.app`. */
  get replay(): Replay {
    return this.replayFor(this.req.app as unknown as ExpressLikeApp);
  }

  proceed(capture: ResponseCapture | undefined, run?: LeaderRun): void {
    const { guard, req, res } = this;
    // Another guard can see this request only through `next()`: claimed just before it, so
    // that a response served from the cache (at once or later) costs no write to the request.
    HttpGuard.claim(req);
    leadOnServerResponse(res, capture, (status, headers) => leaderHead(guard, run, capture, status, headers));
    if (capture && req.method === 'HEAD') runAsGet(req, res);
    this.next();
  }

  serve(response: PreparedResponse): void {
    writeServerResponse(this.res, response);
  }

  fail(error: unknown): void {
    this.next(error);
  }
}
