import type { OutgoingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { CachePlan, HttpGuard } from './guard.js';
import { capturePayload, isRepresentationHeader, type ResponseCapture } from './capture.js';
import { appendCacheStatus } from './cache-status.js';
import { isTargetedField } from './targeted-fields.js';
import { LoaderError } from '../shared/errors.js';

/**
 * A response as a handler produced it, in a form every adapter over a whole-response handler
 * has (a `fetch` handler's `Response`, Koa's `ctx.body`): status, headers with lower-case
 * names, and a payload (nothing, a string, bytes, or a Node stream).
 */
export interface HandlerAnswer {
  status: number;
  headers: OutgoingHttpHeaders;
  payload: null | string | Uint8Array | Readable;
}

/** What the adapter sends to its client instead. */
export interface ClientAnswer {
  status: number;
  headers: OutgoingHttpHeaders;
  /** Nothing, bytes, or a stream that the adapter must send (or read to its end: it feeds the capture). */
  payload: null | string | Uint8Array | Readable;
}

/** The size of a payload in hand (bytes), or undefined for a stream. */
function payloadSize(payload: HandlerAnswer['payload']): number | undefined {
  if (payload === null) return 0;
  if (typeof payload === 'string') return Buffer.byteLength(payload);
  if (payload instanceof Uint8Array) return payload.byteLength;
  return undefined;
}

/** Takes one `Dogpile-*` field off `headers` and returns its value. */
function take(headers: OutgoingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  delete headers[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/** Every `Dogpile-*` field off `headers` (read by this cache only, never sent). */
export function dropTargeted(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  for (const name of Object.keys(headers)) if (isTargetedField(name)) delete headers[name];
  return headers;
}

/**
 * The leader's handler answered (`capture` set when its response is to be shared): applies the
 * guard's decisions to what its client gets, in the order the other adapters apply them (a stale
 * response standing in for an origin failure, a 304 renewing the stored response, the
 * leader's own `Cache-Status`, a 304 for its own conditional request), and feeds the capture.
 */
export function answerLeader<Req>(guard: HttpGuard<Req>, plan: CachePlan, capture: ResponseCapture | undefined, answer: HandlerAnswer): ClientAnswer {
  const headers: OutgoingHttpHeaders = { ...answer.headers, 'x-cache': 'MISS' };
  const targeted = take(headers, 'dogpile-cache-control');
  const tagged = take(headers, 'dogpile-tags');
  dropTargeted(headers);
  if (tagged !== undefined) plan.tagged = tagged;
  const { status, payload } = answer;
  const stale = capture ? guard.staleOnError(plan, status) : undefined;
  if (capture && stale) {
    // The origin failed: its client gets the stored response it allows (stale-if-error), and so
    // do the requests waiting for this run (the capture fails as a loader would).
    drain(payload);
    capture.fail(new LoaderError(`the handler answered ${status}; the stored response was served instead`, { key: plan.key }));
    const replaced: OutgoingHttpHeaders = Object.fromEntries(stale.headers);
    Object.assign(replaced, { 'x-cache': stale.xCache, age: String(stale.age), 'cache-status': stale.cacheStatus });
    return { status: stale.status, headers: replaced, payload: stale.body ?? null };
  }
  const renewed = capture ? guard.revalidated304(plan, status, headers) : undefined;
  if (capture && renewed) {
    // The handler confirmed the stored response: its client gets that, renewed.
    const member = guard.leaderHeaders(plan, 304, headers, targeted);
    drain(payload);
    capturePayload(capture, 304, { ...renewed.headers }, null);
    return { status: renewed.status, headers: { ...renewed.headers, 'x-cache': 'MISS', 'cache-status': member }, payload: renewed.body };
  }
  const storable = capture !== undefined && (payload === null || typeof payload === 'string' || payload instanceof Uint8Array || payload instanceof Readable);
  const member = guard.leaderHeaders(plan, status, headers, targeted, storable, payloadSize(payload));
  const notModified = capture !== undefined && guard.leaderNotModified(plan, status, headers);
  const own = { ...headers };
  headers['cache-status'] = appendCacheStatus(headers['cache-status'] as string | string[] | undefined, member);
  if (capture === undefined) return { status, headers, payload };
  delete own['cache-status'];
  delete own['x-cache'];
  const captured = capturePayload(capture, status, own, payload) as ClientAnswer['payload'];
  if (!notModified) return { status, headers, payload: captured };
  // This client's conditional request is answered with a 304; the full response is still
  // captured (a stream read to its end) and stored.
  drain(captured);
  for (const name of Object.keys(headers)) if (isRepresentationHeader(name)) delete headers[name];
  return { status: 304, headers, payload: null };
}

/** A handler that failed (threw): its client gets the stored response `stale-if-error` allows, else the error goes on. */
export function answerLeaderError<Req>(guard: HttpGuard<Req>, plan: CachePlan, capture: ResponseCapture | undefined, error: unknown): ClientAnswer {
  if (capture === undefined) throw error;
  const stale = guard.staleOnError(plan, 500);
  if (stale === undefined) {
    capture.complete(500, {});
    throw error;
  }
  capture.fail(new LoaderError('the handler failed; the stored response was served instead', { key: plan.key, cause: error }));
  const headers: OutgoingHttpHeaders = Object.fromEntries(stale.headers);
  Object.assign(headers, { 'x-cache': stale.xCache, age: String(stale.age), 'cache-status': stale.cacheStatus });
  return { status: stale.status, headers, payload: stale.body ?? null };
}

/** Reads a stream that is not sent to its end (its bytes may still feed a capture). */
export function drain(payload: unknown): void {
  if (payload instanceof Readable) payload.resume();
}
