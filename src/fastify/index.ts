import type {
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
} from 'fastify';
import type { OutgoingHttpHeaders } from 'node:http';
import fp from 'fastify-plugin';
import { toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError, LoaderError } from '../shared/errors.js';
import { capturePayload, isRepresentationHeader, watchClientGone, type ResponseCapture } from '../http/capture.js';
import { dropTargetedFieldsOnWrite, takeTagsField, takeTargetedField } from '../http/targeted-fields.js';
import { Readable } from 'node:stream';
import { HttpGuard, type CachePlan } from '../http/guard.js';
import { appendCacheStatus } from '../http/cache-status.js';
import { freshnessOver, pickFreshness, type HttpCacheOptions } from '../http/options.js';
import { FRESHNESS_OPTION_NAMES, type FreshnessOptions } from '../core/freshness.js';
import type { DogpileCache } from '../core/cache.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { replayer } from './replay.js';

export { HTTP_CACHE_DEFAULTS } from '../http/options.js';

/** Options of `dogpileGuardPlugin`; see `HttpCacheOptions` for each one and its default. */
export type DogpileGuardPluginOptions = HttpCacheOptions<FastifyRequest>;

/**
 * Per-route settings: `config: { dogpile: { ttl: '5m', staleWhileRevalidate: '1m' } }`, or
 * `config: { dogpile: false }`. The stale-serving options override the plugin's for this route.
 */
export interface DogpileRouteConfig extends FreshnessOptions {
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

const ROUTE_CONFIG_NAMES: ReadonlySet<string> = new Set(['ttl', ...FRESHNESS_OPTION_NAMES]);

type RouteHook = (...args: never[]) => unknown;
type RouteHandler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown;

function routeSettings(config: unknown, fallback: number, plugin: FreshnessOptions, route: string, cache: DogpileCache | undefined): { ttl: number; freshness: FreshnessOptions } | false {
  if (config === undefined || config === null) return { ttl: fallback, freshness: plugin };
  if (config === false) return false;
  if (typeof config !== 'object' || Array.isArray(config)) {
    throw new InvalidOptionError('config.dogpile', `expected { ttl } or false on route ${route}`);
  }
  checkKnownOptions(config, ROUTE_CONFIG_NAMES, 'config.dogpile.');
  const { ttl, ...rest } = config as Partial<DogpileRouteConfig>;
  const freshness = { ...plugin, ...pickFreshness(rest, 'config.dogpile.') };
  pickFreshness(freshness, 'config.dogpile.');
  if (cache) freshnessOver(cache, freshness, 'config.dogpile.');
  return { ttl: ttl === undefined ? fallback : toMs(ttl, `config.dogpile.ttl (route ${route})`, { allowZero: true }), freshness };
}

/** Whether `capturePayload` can keep this payload (anything else is sent and not shared). */
function capturable(payload: unknown): boolean {
  return payload === null || payload === undefined || typeof payload === 'string' || payload instanceof Uint8Array || payload instanceof Readable;
}

/** The size of a payload in hand (bytes), or undefined for a stream. */
function payloadSize(payload: unknown): number | undefined {
  if (payload === null || payload === undefined) return 0;
  if (typeof payload === 'string') return Buffer.byteLength(payload);
  if (payload instanceof Uint8Array) return payload.byteLength;
  return undefined;
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
  /** Requests this guard handles: the plan, for the leader's `Cache-Status`. */
  const plans = new WeakMap<FastifyRequest, CachePlan>();
  /** `Cache-Status` of requests a rule made pass. */
  const bypassed = new WeakMap<FastifyRequest, string>();
  /** `Dogpile-Cache-Control` values taken off responses by the app-wide hook below. */
  const targeted = new WeakMap<FastifyRequest, string>();
  /** `Dogpile-Tags` values, likewise. */
  const tagFields = new WeakMap<FastifyRequest, string>();
  /** Background refreshes: requests injected to run a route's handler, which this plugin lets through. */
  const replays = replayer(fastify);

  // Dogpile-* fields are read by this cache only: they never leave the server, whatever the
  // route and whoever sets them (a hook that runs after every hook of this plugin included):
  // they are dropped as the headers are written. A background refresh reads them instead.
  fastify.addHook('onRequest', (request, reply, done) => {
    if (!replays.admit(request.raw)) dropTargetedFieldsOnWrite(reply.raw);
    done();
  });

  // App-wide onSend hooks run before the route's, so the values are kept for the capture; the
  // route's onSend below takes those set after this hook (by a later app hook, or the route's own).
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (replays.has(request.raw)) {
      done(null, payload);
      return;
    }
    const value = takeTargetedField(reply);
    if (value !== undefined) targeted.set(request, value);
    const tags = takeTagsField(reply);
    if (tags !== undefined) tagFields.set(request, tags);
    const bypass = bypassed.get(request);
    if (bypass !== undefined) void reply.header('cache-status', bypass);
    // A successful write: the stored responses it invalidates are deleted before it is sent.
    if (HttpGuard.unsafe(request.method) && reply.statusCode >= 200 && reply.statusCode <= 399) {
      const info = { method: request.method, url: request.url, headers: request.headers };
      void guard.invalidate(info, reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders, request).then(() => done(null, payload));
      return;
    }
    done(null, payload);
  });

  // The route's handler is wrapped: a hit is served, a wait happens and a leader's handler runs
  // exactly where the handler would run, after every hook and validation before it (app-level
  // and route-level onRequest, preParsing, preValidation, schema validation, preHandler), so a
  // request that any of them refuses never gets a cached response. The capture in onSend, added
  // after the route's own onSend hooks, sees the final headers (a Set-Cookie added by a later
  // onSend hook keeps the response out of the cache).
  fastify.addHook('onRoute', function (this: FastifyInstance, route: RouteOptions) {
    const settings = routeSettings(route.config?.dogpile, guard.options.ttl, guard.options.freshness, `${String(route.method)} ${route.url}`, guard.options.cache);
    if (settings === false) return;
    const { ttl, freshness } = settings;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('GET') && !methods.includes('HEAD')) return;

    // The HEAD route Fastify adds for a GET route runs the GET handler; its last onSend hook
    // drops the payload, so the capture goes just before it. A HEAD that misses there leads
    // like a GET. A route with its own HEAD handler answers HEAD itself and stores nothing.
    const exposedHead = !methods.includes('GET') && isExposedHeadRoute(route.onSend);
    const headAsGet = methods.includes('GET') || exposedHead;

    // Bound as Fastify binds a handler: to the instance the route is declared on, this one.
    const handler = (route.handler as RouteHandler).bind(this);
    const guarded = function (request: FastifyRequest, reply: FastifyReply): unknown {
      // A background refresh: the handler answers it, and the refresh reads its response.
      if (replays.has(request.raw)) return handler(request, reply);
      // Throws only for a bad `key` result; Fastify sends a handler's throw to its error handler.
      const plan = guard.plan(request, { method: request.method, url: request.url, headers: request.headers }, request.raw, ttl, freshness);
      if (plan === undefined) {
        const bypass = guard.bypassStatus({ method: request.method, url: request.url, headers: request.headers });
        if (bypass !== undefined) bypassed.set(request, bypass);
        return handler(request, reply);
      }
      plans.set(request, plan);
      // Resolving with the reply (a thenable that settles once the response is sent) tells
      // Fastify the response is handled; with a value, Fastify sends it, as for an async handler.
      return new Promise<unknown>((resolve, reject) => {
        guard.handle(plan, {
          headAsGet,
          replay: replays.replay,
          proceed(capture, active = plan) {
            reply.header('x-cache', 'MISS');
            if (capture) {
              plans.set(request, active);
              captures.set(request, capture);
              watchClientGone(reply.raw, capture);
            }
            let result: unknown;
            try {
              result = handler(request, reply);
            } catch (error) {
              reject(error);
              return;
            }
            // A handler returning nothing sent (or will send) the response through `reply`.
            resolve(result === undefined ? reply : result);
          },
          serve(response) {
            reply.code(response.status).headers(response.headerObject).header('x-cache', response.xCache).header('age', String(response.age));
            if (response.cacheStatus) void reply.header('cache-status', response.cacheStatus);
            reply.send(response.body);
            // Sent already unless an async onSend hook is still running: then wait for it.
            resolve(reply.sent ? undefined : reply);
          },
          fail: reject,
        });
      });
    };

    const onSend = function (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void): void {
      if (replays.has(request.raw)) {
        done(null, payload);
        return;
      }
      const capture = captures.get(request);
      const plan = plans.get(request);
      let notModified = false;
      // Set after the app-wide hook took the earlier ones (the last value set wins).
      const lateTargeted = takeTargetedField(reply);
      if (lateTargeted !== undefined) targeted.set(request, lateTargeted);
      const lateTags = takeTagsField(reply);
      if (lateTags !== undefined) tagFields.set(request, lateTags);
      const tags = tagFields.get(request);
      if (plan !== undefined && tags !== undefined) plan.tagged = tags;
      const answered = reply.statusCode;
      const stale = plan !== undefined && capture !== undefined ? guard.staleOnError(plan, answered) : undefined;
      if (plan !== undefined && capture !== undefined && stale !== undefined) {
        // The origin failed (its error handler's reply included): its client gets the stored
        // response it allows (stale-if-error), and so do the requests waiting for this run.
        for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
        void reply.headers(Object.fromEntries(stale.headers)).header('x-cache', stale.xCache).header('age', String(stale.age)).header('cache-status', stale.cacheStatus).code(stale.status);
        plans.delete(request);
        captures.delete(request);
        capture.fail(new LoaderError(`the handler answered ${answered}; the stored response was served instead`, { key: plan.key }));
        // The handler's own body is not sent: a stream of it is read to its end and dropped.
        if (payload instanceof Readable) payload.resume();
        done(null, stale.body ?? null);
        return;
      }
      const renewed = plan !== undefined && capture !== undefined ? guard.revalidated304(plan, reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders) : undefined;
      if (plan !== undefined && capture !== undefined && renewed !== undefined) {
        // The handler confirmed the stored response (a 304 to the revalidation): its client
        // gets that, renewed; the capture renews the stored copy.
        const member = guard.leaderHeaders(plan, 304, reply.getHeaders() as OutgoingHttpHeaders, targeted.get(request));
        for (const name of Object.keys(reply.getHeaders())) if (name !== 'x-cache') reply.removeHeader(name);
        void reply.headers(renewed.headers).header('cache-status', member).code(renewed.status);
        plans.delete(request);
        captures.delete(request);
        capturePayload(capture, 304, { ...renewed.headers }, null);
        done(null, renewed.body);
        return;
      }
      if (plan !== undefined && reply.getHeader('x-cache') === 'MISS') {
        // The handler ran for this request: its response, with this cache's status.
        const value = targeted.get(request);
        const headers = reply.getHeaders() as OutgoingHttpHeaders;
        if (value !== undefined) plan.targeted = value;
        const member = guard.leaderHeaders(plan, reply.statusCode, headers, value, capture !== undefined && capturable(payload), payloadSize(payload));
        void reply.header('cache-status', appendCacheStatus(reply.getHeader('cache-status') as string | string[] | undefined, member));
        notModified = capture !== undefined && guard.leaderNotModified(plan, reply.statusCode, headers);
        plans.delete(request);
      }
      if (capture === undefined) {
        done(null, payload);
        return;
      }
      captures.delete(request);
      const status = reply.statusCode;
      const headers = { ...(reply.getHeaders() as OutgoingHttpHeaders) };
      delete headers['cache-status'];
      const captured = capturePayload(capture, status, headers, payload);
      if (!notModified) {
        done(null, captured);
        return;
      }
      // This client's conditional request is answered with a 304; the full response is still
      // captured (a stream read to its end) and stored.
      if (captured instanceof Readable) captured.resume();
      for (const name of Object.keys(reply.getHeaders())) if (isRepresentationHeader(name)) reply.removeHeader(name);
      void reply.code(304);
      done(null, null);
    };

    route.handler = guarded as RouteOptions['handler'];
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
 * Register it before the routes it should cover. Responses say `X-Cache: MISS | HIT | COALESCED | STALE`
 * (and `Age` when served from the cache).
 */
export const dogpileGuardPlugin = fp(dogpileGuard, { name: 'dogpile-guard', fastify: '5.x' });

export default dogpileGuardPlugin;
