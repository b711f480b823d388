import type { Context, Env, Input, MiddlewareHandler } from 'hono';
import type { HttpCacheOptions } from '../http/options.js';
import { WebGuard } from '../http/web-exchange.js';

export { HTTP_CACHE_DEFAULTS } from '../http/options.js';

/** Options of the Hono `dogpileGuard()`; `key`, `skip` and `tags` receive Hono's context. See `HttpCacheOptions` for each option and its default. */
export type DogpileGuardOptions<E extends Env = Env, P extends string = string, I extends Input = Input> = HttpCacheOptions<Context<E, P, I>>;

/**
 * Hono middleware that caches GET responses and coalesces concurrent misses: one request runs
 * the route handler, every other request for the same resource (in this process, or in any
 * process sharing the cache's Redis) waits and is sent that response.
 *
 * ```ts
 * app.use(dogpileGuard({ cache, ttl: '30s' }));                       // app-wide
 * app.get('/report', dogpileGuard({ ttl: '5m' }), (c) => c.json(r));  // one route
 * ```
 *
 * A hit is answered where the middleware sits: the middleware before it still run. Responses say
 * `X-Cache: MISS | HIT | COALESCED | STALE`, `Cache-Status`, and `Age` when served from the cache.
 */
export function dogpileGuard<E extends Env = Env, P extends string = string, I extends Input = Input>(options?: DogpileGuardOptions<E, P, I>): MiddlewareHandler<E, P, I> {
  const web = new WebGuard<Context<E, P, I>>(options);
  return async function dogpileGuardMiddleware(c, next) {
    const original = c.req.raw;
    let ran = false;
    const response = await web.handle(c, original, async (request) => {
      ran = true;
      // The leader's handler sees the request the cache rebuilt for it (a HEAD run as a GET,
      // its validators taken off); the rest of the chain reads `c.req` as before.
      c.req.raw = request;
      try {
        await next();
      } finally {
        c.req.raw = original;
      }
      return c.res;
    });
    // The handler's own response is replaced as it is (headers it gained on the way included);
    // a response from the cache keeps what the middleware before this one set.
    if (ran) c.res = undefined;
    c.res = response;
  };
}
