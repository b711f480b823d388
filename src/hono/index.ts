import type { IncomingHttpHeaders } from 'node:http';
import type { Context, Env, Input, MiddlewareHandler } from 'hono';
import type { HttpCacheOptions } from '../http/options.js';
import { WebGuard, type RunHandler } from '../http/exchange/web-exchange.js';
import { InvalidOptionError } from '../shared/errors.js';
import { ForegroundRefreshNotice } from '../http/flow/refresh-notice.js';

export { HTTP_CACHE_DEFAULTS, type HttpCacheOptions } from '../http/options.js';

/** Options of the Hono `dogpileGuard()`; `key`, `skip` and `tags` receive Hono's context. See `HttpCacheOptions` for each option and its default. */
export interface DogpileGuardOptions<E extends Env = Env, P extends string = string, I extends Input = Input> extends HttpCacheOptions<Context<E, P, I>> {
  /**
   * The Hono app (anything with its `fetch(request)`): with it, a stale response inside its
   * window is refreshed in the background, by `app.fetch()` with a request reconstructed from the
   * stored one (docs/http-refresh.md says what it carries) and no `env`: a route that reads
   * `c.env` (bindings, Node's `incoming`) should keep `refresh: 'foreground'`. Without it the
   * request that wins a refresh runs the handler in the foreground (a middleware's `next` runs
   * only for its own request).
   */
  app?: { fetch(request: Request): Response | Promise<Response> };
}

/**
 * The request's header fields as Node parsed them, when `@hono/node-server` serves it (its
 * bindings carry the `IncomingMessage`) and the request is still the one it built from that
 * message (whose `headers` are a lazy view, not a `Headers` of their own): reading them there
 * spares building a `Headers` object per request. Undefined otherwise (Bun, Deno, a request a
 * middleware replaced, a refresh through `app.fetch`).
 */
function incomingHeaders(env: unknown, request: Request): IncomingHttpHeaders | undefined {
  const incoming = (env as { incoming?: { headers?: unknown } } | undefined)?.incoming;
  const headers = incoming?.headers;
  if (headers === null || typeof headers !== 'object') return undefined;
  return Object.getPrototypeOf(request.headers) === Headers.prototype ? undefined : (headers as IncomingHttpHeaders);
}

/** What a middleware with a stale window and no `app` is told, once (see `DOGPILE_HONO_NO_APP` in docs/adapters-web.md). */
function noAppWarning(source: string): string {
  return (
    `dogpile-guard: a Hono dogpileGuard() with a stale window (${source}) but no \`app\` refreshes stale responses in the foreground: ` +
    'the request that wins a refresh waits for the handler. Pass the app, `dogpileGuard({ ..., app })`, to refresh in the background ' +
    "(or say `refresh: 'foreground'` to keep it so)."
  );
}

/**
 * Hono middleware that caches GET responses and coalesces concurrent misses: one request runs
 * the route handler, every other request for the same resource (in this process, or in any
 * process sharing the cache's Redis) waits and is sent that response.
 *
 * ```ts
 * app.use(dogpileGuard({ cache, ttl: '30s' }));                       // app-wide
 * app.get('/report', dogpileGuard({ ttl: '5m' }), (c) => c.json(r));  // one route
 * app.use(dogpileGuard({ cache, staleWhileRevalidate: '1m', app }));  // refreshes in the background
 * ```
 *
 * A hit is answered where the middleware sits: the middleware before it still run. With
 * `{ app }`, stale responses are refreshed in the background. Responses say
 * `X-Cache: MISS | HIT | COALESCED | STALE`, `Cache-Status`, and `Age` when served from the cache.
 */
export function dogpileGuard<E extends Env = Env, P extends string = string, I extends Input = Input>(options?: DogpileGuardOptions<E, P, I>): MiddlewareHandler<E, P, I> {
  const { app, ...rest } = options ?? {};
  if (app !== undefined && (app === null || typeof (app as { fetch?: unknown }).fetch !== 'function')) {
    throw new InvalidOptionError('app', 'must be the Hono app (an object with a fetch(request) method), for background refreshes');
  }
  const web = new WebGuard<Context<E, P, I>>(options === undefined ? undefined : rest);
  const replay: RunHandler | undefined = app === undefined ? undefined : (request) => app.fetch(request);
  // Without `app` a stale window is refreshed in the foreground: said once per middleware.
  const notice = new ForegroundRefreshNotice(web.guard as never, 'DOGPILE_HONO_NO_APP', noAppWarning, app !== undefined);
  const middleware = function dogpileGuardMiddleware(c: Context<E, P, I>, next: () => Promise<void>): Promise<void> | undefined {
    notice.check();
    const original = c.req.raw;
    let ran = false;
    const nodeHeaders = incomingHeaders(c.env, original);
    const answer = web.answer(c, original, async (request) => {
      ran = true;
      // The leader's handler sees the request the cache rebuilt for it (a HEAD run as a GET,
      // its validators taken off); the rest of the chain reads `c.req` as before.
      c.req.raw = request;
      try {
        await next();
      } finally {
        c.req.raw = original;
      }
      notice.checkResponse(c.res.status, () => Object.fromEntries(c.res.headers));
      return c.res;
    }, replay, nodeHeaders);
    // A hit from process memory is here at once: answered without a promise of this
    // middleware's own (Hono awaits what a middleware returns, a promise or not).
    if (!(answer instanceof Promise)) {
      c.res = answer;
      return undefined;
    }
    return answer.then((response) => {
      // The handler's own response is replaced as it is (headers it gained on the way
      // included); a response from the cache keeps what the middleware before this one set.
      if (ran) c.res = undefined;
      c.res = response;
    });
  };
  return middleware as MiddlewareHandler<E, P, I>;
}
