import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { OutgoingHttpHeaders } from 'node:http';
import fp from 'fastify-plugin';
import { watchClientGone, type ResponseCapture } from '../http/flow/capture.js';
import { dropTargetedFieldsOnWrite } from '../http/rules/targeted-fields.js';
import { HttpGuard, type LeaderRun, type PassThrough } from '../http/flow/guard.js';
import type { Exchange } from '../http/flow/plan-types.js';
import { capturable, leaderHead, leaderPayload, payloadSize } from '../http/flow/leader-answer.js';
import { servedNodeFields, type Replay } from '../http/pipeline.js';
import type { PreparedResponse } from '../http/flow/serve.js';
import type { HttpCacheOptions } from '../http/options.js';
import { replayer } from './replay.js';
import { SettleOnce } from '../http/flow/settle-once.js';
import { named, warnOfEarlyRoutes } from './route-order.js';
import { routeSettings, type DogpileRouteConfig } from './route-config.js';

export { HTTP_CACHE_DEFAULTS, type HttpCacheOptions } from '../http/options.js';

/** Options of `dogpileGuardPlugin`; see `HttpCacheOptions` for each one and its default. */
export type DogpileGuardPluginOptions = HttpCacheOptions<FastifyRequest>;

export type { DogpileRouteConfig } from './route-config.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** dogpile-guard for this route: `{ ttl }` to override the plugin's TTL, `false` to leave it uncached. */
    dogpile?: DogpileRouteConfig | false;
  }
}

/** Options Fastify itself may put in a plugin's options object. */
const FASTIFY_REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers', 'childLoggerFactory'];

type RouteHook = (...args: never[]) => unknown;
type RouteHandler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown;

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

/** Sends a response from the cache through `reply`, so the route's onSend hooks still see it. */
function serveOn(reply: FastifyReply, response: PreparedResponse): void {
  // Shared by every hit on the response: Fastify keeps each value as given and replaces it when
  // set again (it appends only to `Set-Cookie`, which a stored response never has).
  void reply.code(response.status).headers(servedNodeFields(response) as Record<string, string | string[]>);
  reply.send(response.body);
}

/** What the plugin keeps per request whose handler leads: the run and its capture, when the response is shared. */
type Leads = WeakMap<FastifyRequest, { run: LeaderRun | undefined; capture: ResponseCapture | undefined }>;

/**
 * What the guard does with one request of a cached route, and its outcome handed to Fastify as
 * the handler's return value (`value()`): the reply says the response is handled; a value is
 * sent, as an async handler's is; a throw goes to the error handler. An answer known before
 * `handle` returns is returned as it is, with no promise. A class: its methods sit on the
 * prototype, so a request costs one object of one shape.
 */
class FastifyExchange extends SettleOnce<unknown> implements Exchange {
  constructor(
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly handler: (request: FastifyRequest, reply: FastifyReply) => unknown,
    private readonly leads: Leads,
    readonly headAsGet: boolean,
    readonly replay: Replay,
  ) {
    super();
  }

  proceed(capture: ResponseCapture | undefined, run?: LeaderRun): void {
    const { request, reply } = this;
    this.leads.set(request, { run, capture });
    if (capture) watchClientGone(reply.raw, capture);
    if (capture && request.raw.method === 'HEAD') Object.defineProperty(request, 'method', { value: 'GET', configurable: true }); // stores the GET response
    let result: unknown;
    try {
      result = this.handler(request, reply);
    } catch (error) {
      this.reject(error);
      return;
    }
    // A handler returning nothing sent (or will send) the response through `reply`.
    this.resolve(result === undefined ? reply : result);
  }

  serve(response: PreparedResponse): void {
    const { reply } = this;
    serveOn(reply, response);
    // Sent already unless an async onSend hook is still running: then wait for it.
    this.resolve(reply.sent ? undefined : reply);
  }

  fail(error: unknown): void {
    this.reject(error);
  }
}

/** Distinguishes the hooks of each registration of the plugin in `printRoutes()`. */
let registrations = 0;

const dogpileGuard: FastifyPluginAsync<DogpileGuardPluginOptions> = async (fastify: FastifyInstance, options) => {
  const registration = ++registrations;
  const guard = new HttpGuard<FastifyRequest>(options, { extra: FASTIFY_REGISTER_OPTIONS });
  /** Requests whose handler leads: the run and its capture, when the response is shared. */
  const leads: Leads = new WeakMap();
  /** Requests the cache does not answer: what the pipeline does around their handler. */
  const passing = new WeakMap<FastifyRequest, PassThrough>();
  /** Background refreshes: requests injected to run a route's handler, which this plugin lets through. */
  const replays = replayer(fastify);

  // Dogpile-* fields are read by this cache only: they never leave the server, whatever the
  // route and whoever sets them: they are dropped as the headers are written (a background
  // refresh reads them instead). Named, as the capture below: see `warnOfEarlyRoutes`.
  const scopeHook = `dogpileGuardScope${registration}`;
  fastify.addHook('onRequest', named((request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (!replays.admit(request.raw)) dropTargetedFieldsOnWrite(reply.raw);
    done();
  }, scopeHook));

  // A request the cache does not answer (an uncached route's too): the pipeline's header fields,
  // and a successful write's invalidation before the response is sent.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (HttpGuard.claimed(request.raw) || replays.has(request.raw) || leads.has(request)) {
      done(null, payload);
      return;
    }
    const pass = passing.get(request) ?? guard.passing({ method: request.method, url: request.url, headers: request.headers }, request, false);
    for (const [name, value] of pass.headers) void reply.header(name, value);
    const after = pass.afterHandler(reply.statusCode, () => reply.getHeaders() as OutgoingHttpHeaders);
    if (after === undefined) done(null, payload);
    else void after.then(() => done(null, payload));
  });

  // The leader's response, after the route's own onSend hooks: what is stored, and what its
  // client gets. Every GET or HEAD route this plugin sees carries it (an uncached one too).
  const captureHook = `dogpileGuardCapture${registration}`;
  const onSend = named(function (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void): void {
    const lead = leads.get(request);
    if (lead === undefined || replays.has(request.raw)) {
      done(null, payload);
      return;
    }
    leads.delete(request); // a HEAD that led ran as a GET (see `proceed`): Fastify's HEAD handling follows
    if (Object.hasOwn(request, 'method')) delete (request as { method?: string }).method;
    const { run, capture } = lead;
    const headers = reply.getHeaders() as OutgoingHttpHeaders;
    const head = leaderHead(guard, run, capture, reply.statusCode, headers, capturable(payload), payloadSize(payload));
    if (head.replaceAll) for (const name of Object.keys(headers)) reply.removeHeader(name);
    for (const name of head.remove) reply.removeHeader(name);
    for (const [name, value] of head.set) void reply.header(name, value);
    void reply.code(head.status);
    done(null, leaderPayload(head, capture, payload));
  }, captureHook);

  // The route's handler is wrapped: a hit is served, a wait happens and a leader's handler runs
  // exactly where the handler would run, after every hook and validation before it (app-level
  // and route-level onRequest, preParsing, preValidation, schema validation, preHandler), so a
  // request that any of them refuses never gets a cached response. The capture in onSend, added
  // after the route's own onSend hooks, sees the final headers (a Set-Cookie added by a later
  // onSend hook keeps the response out of the cache).
  fastify.addHook('onRoute', function (this: FastifyInstance, route: RouteOptions) {
    const settings = routeSettings(route.config?.dogpile, guard.options.ttl, guard.options.freshness, `${String(route.method)} ${route.url}`, guard.options.cache);
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('GET') && !methods.includes('HEAD')) return;

    // The HEAD route Fastify adds for a GET route runs the GET handler; its last onSend hook
    // drops the payload, so the capture goes just before it. A HEAD that misses there leads
    // like a GET. A route with its own HEAD handler answers HEAD itself and stores nothing.
    const exposedHead = !methods.includes('GET') && isExposedHeadRoute(route.onSend);
    const headAsGet = methods.includes('GET') || exposedHead;
    route.onSend = (exposedHead ? insertBeforeLastHook(route.onSend, onSend as RouteHook) : appendHook(route.onSend, onSend as RouteHook)) as RouteOptions['onSend'];
    if (settings === false) return;
    const { ttl, freshness } = settings;

    // Bound as Fastify binds a handler: to the instance the route is declared on, this one.
    const handler = (route.handler as RouteHandler).bind(this);
    const guarded = function (request: FastifyRequest, reply: FastifyReply): unknown {
      // A background refresh: the handler answers it, and the refresh reads its response.
      if (replays.has(request.raw)) return handler(request, reply);
      // Throws only for a bad `key` result; Fastify sends a handler's throw to its error handler.
      const plan = guard.plan(request, { method: request.method, url: request.url, headers: request.headers }, request.raw, ttl, freshness);
      if (plan === undefined) {
        passing.set(request, guard.passing({ method: request.method, url: request.url, headers: request.headers }, request));
        return handler(request, reply);
      }
      // A hit from process memory is sent at once. The reply (a thenable that settles once the
      // response is sent) says the response is handled: an async onSend hook is still running.
      const hit = guard.hitAtOnce(plan, headAsGet);
      if (hit !== undefined) {
        serveOn(reply, hit);
        return reply.sent ? undefined : reply;
      }
      const exchange = new FastifyExchange(request, reply, handler, leads, headAsGet, replays.replay);
      guard.handle(plan, exchange);
      return exchange.value();
    };

    route.handler = guarded as RouteOptions['handler'];
  });

  // `onRoute` sees only the routes added after this plugin: the others are named at start-up.
  fastify.addHook('onReady', function (this: FastifyInstance, done: (err?: Error) => void) {
    warnOfEarlyRoutes(this, scopeHook, captureHook);
    done();
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
 * Register it before the routes it should cover. Responses say `X-Cache: MISS | HIT | COALESCED | STALE`
 * (and `Age` when served from the cache).
 */
export const dogpileGuardPlugin = fp(dogpileGuard, { name: 'dogpile-guard', fastify: '5.x' });

export default dogpileGuardPlugin;
