import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { SettleOnce } from '../flow/settle-once.js';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import { HttpGuard, type CachePlan, type HttpRequestInfo, type LeaderRun, type PassThrough } from '../flow/guard.js';
import type { Exchange } from '../flow/plan-types.js';
import { RequestClaims } from '../flow/request-plan.js';
import type { ResponseCapture } from '../flow/capture.js';
import type { PreparedResponse } from '../flow/serve.js';
import type { HttpCacheOptions } from '../options.js';
import { LoaderError } from '../../shared/errors.js';
import { requestHost } from '../rules/cache-key.js';
import { servedFieldRecord, servedInstructions, type Replay } from '../pipeline.js';
import { answerLeader, answerLeaderError, drain, dropTargeted, hasNoContent, type ClientAnswer, type HandlerAnswer } from '../flow/leader-answer.js';

/** Runs the handler for a request (the original one, or the one the guard rebuilt for a lead). */
export type RunHandler = (request: Request) => Response | Promise<Response>;

/** A `Request`'s headers as Node has them: lower-case names, `set-cookie` a list, others joined. */
export function requestHeaders(request: Request): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  request.headers.forEach((value, name) => {
    headers[name] = value;
  });
  if (headers.host === undefined) {
    const host = new URL(request.url).host;
    if (host !== '') headers.host = host;
  }
  return headers;
}

/**
 * What the guard reads of a `Request`: method, path with query, headers. `nodeHeaders`, when
 * given, are the same request's header fields as Node parsed them (a server that builds its
 * `Request` lazily from an `IncomingMessage`): read as they are instead of enumerating the
 * `Request`'s, which would make it build a `Headers` object for nothing.
 */
function requestInfo(request: Request, nodeHeaders?: IncomingHttpHeaders): HttpRequestInfo {
  const headers = nodeHeaders ?? requestHeaders(request);
  const target = webTarget(request.url);
  const info: HttpRequestInfo = { method: request.method, url: target.path, headers };
  const host = requestHost(headers);
  // The handler may read the URL's scheme and authority, and the Host field: when they are not
  // `http` and that field, the key is built from what the handler sees (no space is in either).
  if (!sameAuthority(target, host)) info.origin = `${target.scheme}://${target.authority} ${host}`;
  else if (target.scheme !== 'http') info.origin = `${target.scheme}://${target.authority}`;
  return info;
}

/** A `Request`'s URL in parts: scheme (lower-case), authority, and path with query (as the `Request` gives them, no fragment). */
interface WebTarget {
  scheme: string;
  authority: string;
  path: string;
}

function webTarget(url: string): WebTarget {
  const scheme = url.indexOf('://');
  const slash = scheme === -1 ? -1 : url.indexOf('/', scheme + 3);
  if (slash === -1) {
    const parsed = new URL(url);
    return { scheme: parsed.protocol.slice(0, -1), authority: parsed.host, path: `${parsed.pathname}${parsed.search}` };
  }
  return { scheme: url.slice(0, scheme).toLowerCase(), authority: url.slice(scheme + 3, slash), path: url.slice(slash) };
}

/**
 * True when the `Host` field names the authority of the `Request`'s URL (case aside, a default
 * port written or not). A server that takes the authority of an absolute-form target over `Host`
 * (RFC 9112 §3.2.2), or one that builds its URLs from its own name (Next.js), hands the handler
 * a URL that the `Host` field does not name: the handler may read either, so the key has both.
 */
function sameAuthority(target: WebTarget, host: string): boolean {
  if (host === target.authority) return true;
  const lower = host.toLowerCase();
  if (lower === target.authority) return true;
  const port = target.scheme === 'https' ? ':443' : target.scheme === 'http' ? ':80' : undefined;
  return port !== undefined && lower.endsWith(port) && lower.slice(0, -port.length) === target.authority;
}

/** A `Response`'s headers as an object with lower-case names (`set-cookie` a list). */
function responseHeaders(response: Response): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers['set-cookie'] = cookies;
  return headers;
}

function toHeaders(headers: OutgoingHttpHeaders | Readonly<Record<string, string | string[]>>): Headers {
  const out = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(name, String(v));
    else out.set(name, String(value));
  }
  return out;
}

/** The handler's `Response` as a payload the capture reads: its body as a Node stream. */
function handlerAnswer(response: Response): HandlerAnswer {
  const body = response.body;
  return { status: response.status, headers: responseHeaders(response), payload: body === null ? null : Readable.fromWeb(body as unknown as NodeWebStream<Uint8Array>) };
}

type Body = ConstructorParameters<typeof Response>[0];

function webBody(payload: ClientAnswer['payload'], head: boolean): Body {
  if (payload === null) return null;
  if (head) {
    // Headers only for a HEAD; a stream is still read to its end, for the capture.
    drain(payload);
    return null;
  }
  if (payload instanceof Readable) return Readable.toWeb(payload) as unknown as ReadableStream<Uint8Array>;
  return payload as Body;
}

function toResponse(answer: ClientAnswer, head: boolean): Response {
  const status = answer.status;
  return new Response(hasNoContent(status) ? null : webBody(answer.payload, head), { status, headers: toHeaders(answer.headers) });
}

/**
 * A response from the cache. Headers as a plain object and the stored bytes as they are: what
 * `@hono/node-server` writes without building a `Headers` or copying the body.
 */
function served(response: PreparedResponse, head: boolean): Response {
  const served = servedInstructions(response);
  // Shared by the hits of the same second: @hono/node-server copies a plain record before changing it, a `Headers` copies it.
  const headers = servedFieldRecord(response) as Record<string, string>;
  const bodyless = head || served.body === undefined || hasNoContent(served.status);
  return new Response(bodyless ? null : (served.body as unknown as Body), { status: served.status, headers });
}

/** The handler's own `Response`, with every `Dogpile-*` field off it and the pipeline's fields on it. */
async function passed(response: Response, fields: PassThrough['headers']): Promise<Response> {
  let dirty = fields.length > 0;
  response.headers.forEach((_value, name) => {
    if (name.startsWith('dogpile-')) dirty = true;
  });
  if (!dirty) return response;
  const headers = toHeaders(dropTargeted(responseHeaders(response)));
  for (const [name, value] of fields) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/**
 * The request the leader's handler runs with: the guard may have changed its headers (a
 * conditional request's validators taken off, a revalidation's put on), and a HEAD runs as a
 * GET so that the full response can be stored.
 */
function leaderRequest(request: Request, plan: CachePlan): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(plan.headers)) {
    // HTTP/2 pseudo-header fields (`:authority`...) are in Node's parsed headers, not in a `Request`'s.
    if (value === undefined || name.startsWith(':')) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  // Without the client's signal: the run is shared, and goes on for the requests waiting for it
  // when its own client leaves (a client leaving mid-body cancels only its copy of the stream).
  // Deno's signal also aborts once a response has been sent, so it says nothing either way.
  const rebuilt = new Request(request.url, { method: 'GET', headers });
  leaderRequests.claim(rebuilt);
  return rebuilt;
}

/** `scheme://authority` of an absolute URL. */
function originOf(url: string): string {
  const target = webTarget(url);
  return `${target.scheme}://${target.authority}`;
}

/**
 * What the guard does with one request of a fetch handler or middleware. A class: its methods
 * sit on the prototype, so a request costs one object of one shape; and `replay` is made only
 * when a refresh reads it (a hit never does), since checking the target parses the URL.
 */
class WebExchange<Req> extends SettleOnce<Response> implements Exchange {
  readonly headAsGet = true;

  constructor(
    private readonly owner: WebGuard<Req>,
    private readonly request: Request,
    private readonly run: RunHandler,
    private readonly replayRun: RunHandler | undefined,
    private readonly head: boolean,
  ) {
    super();
  }

  get replay(): Replay | undefined {
    const { replayRun, request } = this;
    return replayRun === undefined || !replayable(request.url) ? undefined : replayWith(request, replayRun);
  }

  proceed(capture: ResponseCapture | undefined, lead?: LeaderRun): void {
    this.owner.lead(this.request, lead, capture, this.run).then(
      (response) => this.resolve(response),
      (error: unknown) => this.reject(error),
    );
  }

  serve(response: PreparedResponse): void {
    this.resolve(served(response, this.head));
  }

  fail(error: unknown): void {
    this.reject(error);
  }
}

/**
 * True when a `Request` built from `url` has exactly that URL: a server may hand the handler a
 * URL the WHATWG parser would write otherwise (`@hono/node-server` keeps most targets as they
 * arrived), and a background refresh, whose `Request` is parsed anew, would then run the
 * handler for another target. Such a request is refreshed in the foreground.
 */
function replayable(url: string): boolean {
  try {
    return new URL(url).href === url;
  } catch {
    return false;
  }
}

/** Requests made for a leader's handler: another guard on the way (app-wide and per route) lets them through. */
const leaderRequests = new RequestClaims('leader');

/**
 * A background refresh: the handler runs for the reconstructed request, whose URL is the
 * stored target at the origin of the request that found the response stale (that request has
 * the same key, so the same scheme and authority). The target is joined to the origin as text,
 * never resolved against it: a path that starts with `//` stays a path. Its response is read as
 * it streams.
 */
function replayWith(live: Request, run: RunHandler): Replay {
  return async (replayed) => {
    const url = originOf(live.url) + replayed.url;
    // Never a handler run for another target than the stored one (see `replayable`).
    if (!replayable(url)) throw new LoaderError(`a background refresh cannot replay the target ${JSON.stringify(replayed.url)} exactly`);
    const request = new Request(url, { method: 'GET', headers: replayed.headers });
    leaderRequests.claim(request);
    const response = await run(request);
    const headers = responseHeaders(response);
    const body = response.body;
    return { status: response.status, headers, body: body === null ? [] : (body as unknown as AsyncIterable<Uint8Array>) };
  };
}

/**
 * The framework-neutral translation between `Request`/`Response` and the guard: what
 * `withDogpile()` and the Hono middleware share. `req` is what the user's `key`, `skip` and
 * `tags` functions receive (the `Request`, or Hono's context).
 */
export class WebGuard<Req> {
  readonly guard: HttpGuard<Req>;

  constructor(options?: HttpCacheOptions<Req>) {
    this.guard = new HttpGuard<Req>(options);
  }

  /**
   * Serves, waits or leads for `request`. `replay`, when given, runs the handler for a request
   * with no client behind it, for a background refresh (a `fetch` handler itself; the app's
   * `fetch` for a middleware, whose `next` runs only once); without it, refreshes run in the
   * foreground. `nodeHeaders`: see `requestInfo`.
   */
  handle(req: Req, request: Request, run: RunHandler, replay?: RunHandler, nodeHeaders?: IncomingHttpHeaders): Promise<Response> {
    try {
      return Promise.resolve(this.answer(req, request, run, replay, nodeHeaders));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `handle`, with an answer known at once (a hit from process memory) returned as it is, not
   * in a promise; an error known at once (a bad `key` result) is thrown.
   */
  answer(req: Req, request: Request, run: RunHandler, replay?: RunHandler, nodeHeaders?: IncomingHttpHeaders): Response | Promise<Response> {
    if (leaderRequests.has(request)) return run(request);
    const info = requestInfo(request, nodeHeaders);
    const plan = this.guard.plan(req, info, request);
    if (plan === undefined) return this.pass(info, req, request, run);
    const head = request.method === 'HEAD';
    const hit = this.guard.hitAtOnce(plan, true);
    if (hit !== undefined) return served(hit, head);
    const exchange = new WebExchange(this, request, run, replay, head);
    this.guard.handle(plan, exchange);
    return exchange.value();
  }

  /** @internal The leader's run of the handler for `request`, its answer made from the response it returns (or its throw). */
  async lead(request: Request, lead: LeaderRun | undefined, capture: ResponseCapture | undefined, run: RunHandler): Promise<Response> {
    const head = request.method === 'HEAD';
    let answer: ClientAnswer;
    try {
      const response = await run(capture === undefined || lead === undefined ? request : leaderRequest(request, lead.plan));
      answer = answerLeader(this.guard, lead, capture, handlerAnswer(response));
    } catch (error) {
      answer = answerLeaderError(this.guard, lead, capture, error);
    }
    return toResponse(answer, head);
  }

  /** A request the cache does not answer: a write invalidates what it changed before its response goes out. */
  private async pass(info: HttpRequestInfo, req: Req, request: Request, run: RunHandler): Promise<Response> {
    if (HttpGuard.claimed(request) || leaderRequests.has(request)) return run(request);
    const passing = this.guard.passing(info, req);
    const response = await run(request);
    await passing.afterHandler(response.status, () => responseHeaders(response));
    return passed(response, passing.headers);
  }
}
