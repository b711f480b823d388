import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { beforeHeaders, captureServerResponse, type ResponseCapture } from '../flow/capture.js';
import type { PassThrough } from '../flow/guard.js';
import type { LeaderHead } from '../flow/leader-answer.js';
import { servedNodeFields } from '../pipeline.js';
import type { PreparedResponse } from '../flow/serve.js';

/**
 * The pipeline's decisions applied to a Node `ServerResponse` that a handler writes itself
 * (Express's `res` and anything built on it): for the leader's response and for a response the
 * cache does not answer. Nothing here decides; it only translates.
 */

type Fn = (...args: unknown[]) => unknown;

/**
 * The leader's handler writes `res`: the capture (when the response is shared) records it as it
 * goes, and `decide` is asked once, just before the headers are written, with the final status
 * and header fields; its `LeaderHead` is applied there. A body it replaces is sent instead of the
 * handler's, whose pieces are dropped: the decision is made before the first piece goes out.
 */
export function leadOnServerResponse(res: ServerResponse, capture: ResponseCapture | undefined, decide: (status: number, headers: OutgoingHttpHeaders) => LeaderHead): void {
  /** Bytes sent instead of the handler's body, once decided. */
  let replacement: Buffer | undefined;
  let replaced = false;
  if (capture) {
    captureServerResponse(res, capture);
    const write = res.write as unknown as Fn;
    (res as unknown as { write: Fn }).write = function (this: ServerResponse, ...args: unknown[]): unknown {
      if (!res.headersSent) res.writeHead(res.statusCode);
      if (!replaced) return write.apply(this, args);
      const callback = args.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      if (callback) process.nextTick(callback);
      return true;
    };
    const end = res.end as unknown as Fn;
    (res as unknown as { end: Fn }).end = function (this: ServerResponse, ...args: unknown[]): unknown {
      if (!res.headersSent) res.writeHead(res.statusCode);
      if (replacement === undefined) return end.apply(this, args);
      const body = replacement;
      replacement = undefined;
      return end.call(this, body);
    };
  }
  // Installed after the capture, so it runs first: the capture sees the headers as sent.
  beforeHeaders(res, (status) => {
    const head = decide(status, res.getHeaders());
    if (head.replaceAll) for (const name of res.getHeaderNames()) res.removeHeader(name);
    for (const name of head.remove) res.removeHeader(name);
    for (const [name, value] of head.set) res.setHeader(name, value);
    if (head.body instanceof Buffer) {
      replacement = head.body;
      replaced = true;
    }
    if (capture && head.stored) capture.original = head.stored;
    return head.status;
  });
}

/**
 * A request the cache does not answer: the pipeline's header fields go on its response, and once
 * its handler ends the response, the pipeline's work after the handler (a write's invalidation)
 * is done before the response is sent on, so that the client's next GET does not find what it
 * changed. `Dogpile-*` fields never leave the server (`beforeHeaders` drops them).
 */
export function passOnServerResponse(res: ServerResponse, pass: PassThrough): void {
  const end = res.end as unknown as Fn;
  (res as unknown as { end: Fn }).end = function (this: ServerResponse, ...args: unknown[]): unknown {
    const after = pass.afterHandler(res.statusCode, () => res.getHeaders());
    // Nothing to wait for, or headers already gone: the response is not held.
    if (after === undefined || res.headersSent) return end.apply(this, args);
    void after.then(() => end.apply(this, args));
    return this;
  };
  beforeHeaders(res, () => {
    for (const [name, value] of pass.headers) res.setHeader(name, value);
  });
}

/**
 * Lets the handler of a HEAD request that leads produce the full GET response, so that it can
 * be stored (a framework leaves the body out when `req.method` is HEAD). Node's response still
 * knows the request was HEAD and sends no body. `req.method` is HEAD again once the response ends.
 */
export function runAsGet(req: IncomingMessage, res: ServerResponse): void {
  req.method = 'GET';
  const end = res.end as unknown as Fn;
  (res as unknown as { end: Fn }).end = function (this: ServerResponse, ...args: unknown[]): unknown {
    req.method = 'HEAD';
    return end.apply(this, args);
  };
}

/**
 * Writes a response served from the cache to a Node `ServerResponse` (Express, or any
 * `node:http` server) in two calls: `writeHead` with the fields prepared once per prepared
 * response (a hit of the same second reuses them), then `end`. Where nothing set a header
 * before, Node writes those fields as they are; otherwise it sets them one by one over the
 * ones already set, as `setHeader` would. Every touch of an Express response costs a hit
 * (Express gives it a prototype of its own per request), hence no more than these.
 */
export function writeServerResponse(res: ServerResponse, response: PreparedResponse): void {
  try {
    res.writeHead(response.status, servedNodeFields(response) as OutgoingHttpHeaders);
  } catch (error) {
    // Something before the guard sent the head already (known from `writeHead` itself, which
    // checks first: one read of `headersSent` fewer per hit). Only the end is left to send.
    if ((error as { code?: unknown } | null)?.code !== 'ERR_HTTP_HEADERS_SENT') throw error;
    res.end();
    return;
  }
  if (response.body === undefined) res.end();
  else res.end(response.body);
}
