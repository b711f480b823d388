import type { HttpCacheOptions } from '../http/options.js';
import { InvalidOptionError } from '../shared/errors.js';
import { WebGuard } from '../http/exchange/web-exchange.js';

export { HTTP_CACHE_DEFAULTS, type HttpCacheOptions } from '../http/options.js';

/** Options of `withDogpile()`; see `HttpCacheOptions` for each one and its default. */
export type WithDogpileOptions = HttpCacheOptions<Request>;

/** A web-standard request handler: `Bun.serve`'s and `Deno.serve`'s `fetch`, a Next.js route handler, h3, Elysia, SvelteKit. */
export type FetchHandler<Rest extends unknown[] = unknown[]> = (request: Request, ...rest: Rest) => Response | Promise<Response>;

/**
 * Wraps a `(request: Request, ...rest) => Response` handler so that GET responses are cached and
 * concurrent misses coalesce: one request runs the handler, every other request for the same
 * resource (in this process, or in any process sharing the cache's Redis) waits and gets that
 * response. The leader's client gets the body as the handler streams it; the others get the
 * stored bytes.
 *
 * ```ts
 * export const GET = withDogpile(async (request) => Response.json(await report()), { cache, ttl: '30s' });
 * Bun.serve({ fetch: withDogpile(app.fetch, { cache }) });
 * ```
 *
 * The other arguments (a Next.js route's `{ params }`, Deno's connection info, Bun's server)
 * are passed on to the handler as they are. Responses say `X-Cache: MISS | HIT | COALESCED | STALE`,
 * `Cache-Status`, and `Age` when served from the cache.
 */
export function withDogpile<Rest extends unknown[]>(handler: FetchHandler<Rest>, options?: WithDogpileOptions): (request: Request, ...rest: Rest) => Promise<Response> {
  if (typeof handler !== 'function') throw new InvalidOptionError('handler', `withDogpile() wraps a function (request) => Response, got ${handler === null ? 'null' : typeof handler}`);
  const web = new WebGuard<Request>(options);
  return function dogpileHandler(request: Request, ...rest: Rest): Promise<Response> {
    const run = (req: Request) => handler(req, ...rest);
    return web.handle(request, request, run, run);
  };
}
