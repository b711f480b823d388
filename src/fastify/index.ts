import type {
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  RouteOptions,
} from 'fastify';
import type { OutgoingHttpHeaders } from 'node:http';
import fp from 'fastify-plugin';
import { toMs, type Duration } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import { capturePayload, watchClientGone, type ResponseCapture } from '../http/capture.js';
import { HttpGuard } from '../http/guard.js';
import type { HttpCacheOptions } from '../http/options.js';

export { HTTP_CACHE_DEFAULTS } from '../http/options.js';

/** Options of `dogpileGuardPlugin`; see `HttpCacheOptions` for each one and its default. */
export type DogpileGuardPluginOptions = HttpCacheOptions<FastifyRequest>;

/** Per-route settings: `config: { dogpile: { ttl: '5m' } }`, or `config: { dogpile: false }`. */
export interface DogpileRouteConfig {
  /** How long this route's responses stay cached; overrides the plugin's `ttl`. */
  ttl: Duration;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** dogpile-guard for this route: `{ ttl }` to override the plugin's TTL, `false` to leave it uncached. */
    dogpile?: DogpileRouteConfig | false;
  }
}

/** Options Fastify itself may put in a plugin's options object. */
const FASTIFY_REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers', 'childLoggerFactory'];

type RouteHook = (...args: never[]) => unknown;

function routeTtl(config: unknown, fallback: number, route: string): number | false {
  if (config === undefined || config === null) return fallback;
  if (config === false) return false;
  if (typeof config !== 'object' || Array.isArray(config)) {
    throw new InvalidOptionError('config.dogpile', `expected { ttl } or false on route ${route}`);
  }
  const { ttl } = config as Partial<DogpileRouteConfig>;
  return ttl === undefined ? fallback : toMs(ttl, `config.dogpile.ttl (route ${route})`);
}

function appendHook(existing: unknown, hook: RouteHook): RouteHook[] {
  if (existing === undefined || existing === null) return [hook];
  return [...(Array.isArray(existing) ? (existing as RouteHook[]) : [existing as RouteHook]), hook];
}

/** The name of the onSend hook Fastify puts last on the HEAD route it adds for a GET route. */
const EXPOSED_HEAD_ON_SEND = 'headRouteOnSendHandler';

function isExposedHeadRoute(onSend: unknown): boolean {
  const hooks = Array.isArray(onSend) ? (onSend as unknown[]) : [onSend];
  const last = hooks[hooks.length - 1];
  return typeof last === 'function' && last.name === EXPOSED_HEAD_ON_SEND;
}

function insertBeforeLastHook(existing: unknown, hook: RouteHook): RouteHook[] {
  const hooks = Array.isArray(existing) ? (existing as RouteHook[]) : [existing as RouteHook];
  return [...hooks.slice(0, -1), hook, hooks[hooks.length - 1]!];
}

const dogpileGuard: FastifyPluginAsync<DogpileGuardPluginOptions> = async (fastify: FastifyInstance, options) => {
  const guard = new HttpGuard<FastifyRequest>(options, { extra: FASTIFY_REGISTER_OPTIONS });
  const captures = new WeakMap<FastifyRequest, ResponseCapture>();

  // Hooks are attached per route, after the route's own: an onRequest auth check runs before a
  // response is served from the cache, and the capture in onSend sees the final headers (a
  // Set-Cookie added by a later onSend hook keeps the response out of the cache).
  fastify.addHook('onRoute', (route: RouteOptions) => {
    const ttl = routeTtl(route.config?.dogpile, guard.options.ttl, `${String(route.method)} ${route.url}`);
    if (ttl === false) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('GET') && !methods.includes('HEAD')) return;
    // The HEAD route Fastify adds for a GET route runs the GET handler; its last onSend hook
    // drops the payload, so the capture goes just before it. A HEAD that misses there leads
    // like a GET. A route with its own HEAD handler answers HEAD itself and stores nothing.
    const exposedHead = !methods.includes('GET') && isExposedHeadRoute(route.onSend);
    const headAsGet = methods.includes('GET') || exposedHead;

    const onRequest = function (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
      let plan;
      try {
        plan = guard.plan(request, { method: request.method, url: request.url, headers: request.headers }, request.raw, ttl);
      } catch (error) {
        done(error as Error);
        return;
      }
      if (plan === undefined) {
        done();
        return;
      }
      guard.handle(plan, {
        headAsGet,
        proceed(capture) {
          reply.header('x-cache', 'MISS');
          if (capture) {
            captures.set(request, capture);
            watchClientGone(reply.raw, capture);
          }
          done();
        },
        serve(response) {
          reply.code(response.status).headers(response.headerObject).header('x-cache', response.xCache).header('age', String(response.age));
          reply.send(response.body);
        },
        fail(error) {
          done(error as Error);
        },
      });
    };

    const onSend = function (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void): void {
      const capture = captures.get(request);
      if (capture === undefined) {
        done(null, payload);
        return;
      }
      captures.delete(request);
      done(null, capturePayload(capture, reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders, payload));
    };

    route.onRequest = appendHook(route.onRequest, onRequest as RouteHook) as RouteOptions['onRequest'];
    route.onSend = (exposedHead ? insertBeforeLastHook(route.onSend, onSend as RouteHook) : appendHook(route.onSend, onSend as RouteHook)) as RouteOptions['onSend'];
  });

  // Nothing to close: the cache is the user's (or the shared default). Responses still being
  // captured are given up, so requests waiting for them run their own handler.
  fastify.addHook('onClose', (_instance, done) => {
    guard.abandonPending();
    done();
  });
};

/**
 * Fastify plugin that caches GET responses and coalesces concurrent misses: one request runs
 * the route handler, every other request for the same resource (in this process, or in any
 * process sharing the cache's Redis) waits and is sent that response.
 *
 * ```ts
 * await fastify.register(dogpileGuardPlugin, { cache, ttl: '30s' });
 * fastify.get('/report', { config: { dogpile: { ttl: '5m' } } }, handler);
 * fastify.get('/me', { config: { dogpile: false } }, handler);
 * ```
 *
 * Register it before the routes it should cover. Responses say `X-Cache: MISS | HIT | COALESCED`
 * (and `Age` when served from the cache).
 */
export const dogpileGuardPlugin = fp(dogpileGuard, { name: 'dogpile-guard', fastify: '5.x' });

export default dogpileGuardPlugin;
