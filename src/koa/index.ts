import type Koa from 'koa';
import type { Context, Middleware, Next } from 'koa';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { servedInstructions, type Replay } from '../http/pipeline.js';
import { injectTarget } from '../http/exchange/node-replay.js';
import type { OutgoingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import { HttpGuard, type LeaderRun } from '../http/flow/guard.js';
import { watchClientGone, type ResponseCapture } from '../http/flow/capture.js';
import type { PreparedResponse } from '../http/flow/serve.js';
import type { HttpCacheOptions } from '../http/options.js';
import { isTargetedField } from '../http/rules/targeted-fields.js';
import { answerLeader, answerLeaderError, drain, hasNoContent, type ClientAnswer, type HandlerAnswer } from '../http/flow/leader-answer.js';

export { HTTP_CACHE_DEFAULTS, type HttpCacheOptions } from '../http/options.js';

/** Options of the Koa `dogpileGuard()`; `key`, `skip` and `tags` receive Koa's context. See `HttpCacheOptions` for each option and its default. */
export type DogpileGuardOptions = HttpCacheOptions<Context>;

/** Requests injected for a background refresh: every guard in the app lets them through, Dogpile-* fields included. */
const replayed = new WeakSet<object>();

/**
 * Runs a request through the whole Koa app (every middleware, from the top) with a synthetic
 * request and response (`injectTarget`): the app sees exactly the stored target and the replayed
 * headers, and its response is read whole.
 */
function koaReplay(app: Koa): Replay {
  let listener: ReturnType<Koa['callback']> | undefined;
  return async (request) => {
    listener ??= app.callback();
    const handle = listener;
    const dispatch = (req: IncomingMessage, res: ServerResponse) => {
      replayed.add(req);
      void handle(req, res);
    };
    return injectTarget(dispatch, request);
  };
}

/** What the handler left in `ctx`: status, headers, and `ctx.body` as a payload (an object as its JSON). */
function handlerAnswer(ctx: Context, capture: ResponseCapture | undefined): HandlerAnswer {
  const headers = { ...(ctx.response.headers as OutgoingHttpHeaders) };
  const body: unknown = ctx.body;
  let payload: HandlerAnswer['payload'];
  if (body === null || body === undefined) payload = null;
  else if (body instanceof Readable) payload = capture === undefined ? body : keepReading(body, capture);
  else if (typeof body === 'string' || body instanceof Uint8Array) payload = body;
  else if (body instanceof ReadableStream) payload = Readable.fromWeb(body as NodeWebStream<Uint8Array>);
  else if (body instanceof Response) payload = body.body === null ? null : Readable.fromWeb(body.body as unknown as NodeWebStream<Uint8Array>);
  else {
    payload = JSON.stringify(body);
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  return { status: ctx.status, headers, payload };
}

/**
 * Koa destroys a body stream (`destroy()`, without an error) when its response closes, a client
 * hanging up included, and when the body is replaced. While the capture still reads it (for the
 * requests waiting for this response), that waits until the capture is done: the stream is read
 * to its end, or destroyed then if it has not ended. A destroy with an error is the stream's own
 * failure (what a stream does when a read fails) and goes through at once: the capture breaks
 * (the waiters run their own handler) and Koa ends the response as it would without this cache.
 */
function keepReading(source: Readable, capture: ResponseCapture): Readable {
  const destroy = source.destroy.bind(source);
  source.destroy = (error?: Error) => (capture.settled || error != null ? destroy(error) : source);
  void capture.promise.then(
    () => undefined,
    () => undefined,
  ).then(() => {
    source.destroy = destroy;
    if (!source.readableEnded && !source.destroyed) destroy();
  });
  return source;
}

/** Puts an answer into `ctx` for Koa to send: headers as given, then the body, then the status. */
function apply(ctx: Context, answer: ClientAnswer): void {
  const headOnly = ctx.method === 'HEAD';
  const payload = answer.payload;
  const noContent = hasNoContent(answer.status);
  if (noContent || payload === null) {
    drain(payload);
    ctx.body = noContent ? null : '';
  } else {
    // Koa sends no body for HEAD; a stream is still read to its end, for the capture.
    if (headOnly) drain(payload);
    ctx.body = typeof payload === 'string' || payload instanceof Readable ? payload : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  }
  for (const name of Object.keys(ctx.response.headers)) ctx.remove(name);
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    ctx.set(name, Array.isArray(value) ? value.map(String) : String(value));
  }
  ctx.status = answer.status;
}

function serve(ctx: Context, response: PreparedResponse): void {
  const served = servedInstructions(response);
  apply(ctx, { status: served.status, headers: Object.fromEntries(served.headers) as OutgoingHttpHeaders, payload: served.body ?? null });
}

/**
 * Koa middleware that caches GET responses and coalesces concurrent misses: one request runs
 * the downstream middleware and route, every other request for the same resource (in this
 * process, or in any process sharing the cache's Redis) waits and is sent that response.
 * `ctx.body` may be a string, a Buffer, a stream or an object (sent and stored as JSON).
 *
 * ```ts
 * app.use(dogpileGuard({ cache, ttl: '30s' }));
 * ```
 *
 * Responses say `X-Cache: MISS | HIT | COALESCED | STALE`, `Cache-Status`, and `Age` when served
 * from the cache.
 */
export function dogpileGuard(options?: DogpileGuardOptions): Middleware {
  const guard = new HttpGuard<Context>(options);

  async function lead(ctx: Context, next: Next, run: LeaderRun | undefined, capture: ResponseCapture | undefined): Promise<void> {
    const head = ctx.method === 'HEAD';
    if (capture !== undefined) watchClientGone(ctx.res, capture);
    let answer: ClientAnswer;
    try {
      // A HEAD that leads runs as a GET, so that the full response can be stored.
      if (capture !== undefined && head) ctx.method = 'GET';
      try {
        await next();
      } finally {
        if (head) ctx.method = 'HEAD';
      }
      answer = answerLeader(guard, run, capture, handlerAnswer(ctx, capture));
    } catch (error) {
      answer = answerLeaderError(guard, run, capture, error);
    }
    apply(ctx, answer);
  }

  async function pass(ctx: Context, next: Next): Promise<void> {
    const info = { method: ctx.method, url: ctx.originalUrl, headers: ctx.headers };
    const passing = HttpGuard.claimed(ctx.req) ? undefined : guard.passing(info, ctx);
    await next();
    if (passing === undefined || HttpGuard.claimed(ctx.req)) return;
    await passing.afterHandler(ctx.status, () => ctx.response.headers as OutgoingHttpHeaders);
    // Dogpile-* fields are read by this cache only: never sent.
    for (const name of Object.keys(ctx.response.headers)) if (isTargetedField(name)) ctx.remove(name);
    for (const [name, value] of passing.headers) ctx.set(name, value);
  }

  const replays = new WeakMap<Koa, Replay>();
  const replayFor = (app: Koa): Replay => {
    let replay = replays.get(app);
    if (replay === undefined) replays.set(app, (replay = koaReplay(app)));
    return replay;
  };

  return async function dogpileGuardMiddleware(ctx: Context, next: Next): Promise<void> {
    // A background refresh: the handler answers it, and the refresh reads its response.
    if (replayed.has(ctx.req)) return next();
    const plan = guard.plan(ctx, { method: ctx.method, url: ctx.originalUrl, headers: ctx.headers }, ctx.req);
    if (plan === undefined) return pass(ctx, next);
    const hit = guard.hitAtOnce(plan, true);
    if (hit !== undefined) return serve(ctx, hit);
    return new Promise<void>((resolve, reject) => {
      guard.handle(plan, {
        headAsGet: true,
        replay: replayFor(ctx.app),
        proceed: (capture, run) => {
          lead(ctx, next, run, capture).then(resolve, reject);
        },
        serve: (response) => {
          serve(ctx, response);
          resolve();
        },
        fail: reject,
      });
    });
  };
}
