import type { OutgoingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { HttpGuard, LeaderRun } from './guard.js';
import { isRepresentationHeader, type ResponseCapture } from './capture.js';
import { capturePayload } from './payload-capture.js';
import { appendCacheStatus } from '../rules/cache-status.js';
import { isTargetedField } from '../rules/targeted-fields.js';
import { leaderNotModified, revalidated304 } from '../rules/leader-rules.js';
import { servedInstructions } from '../pipeline.js';
import { ORIGIN_ERROR_STATUSES } from './stale-on-error.js';
import { LoaderError } from '../../shared/errors.js';

/**
 * What the leader's client gets, decided once its handler's status and header fields are final
 * (Express's `writeHead`, Fastify's `onSend`, a `fetch` handler's `Response`). An adapter applies
 * it in this order: removes every header the handler set (`replaceAll`) or the ones in `remove`,
 * sets `set`, sends `status`, and sends the body `body` says.
 */
export interface LeaderHead {
  status: number;
  /** Every header the handler set is removed first: the response is replaced whole. */
  replaceAll: boolean;
  /** Header fields to set, lower-case names. */
  set: Array<[name: string, value: string | string[]]>;
  /** Header fields to remove (this cache's own `Dogpile-*` fields; representation fields for a 304). */
  remove: string[];
  /**
   * `'handler'`: the handler's body goes out (and is captured as it goes); `'none'`: no body for
   * this client, the handler's is still read to its end for the capture; bytes: these instead,
   * the handler's body read and dropped.
   */
  body: 'handler' | 'none' | Buffer;
  /**
   * For a response that is captured as the handler produced it: its status and header fields
   * (without this cache's own), which the capture records whatever this client gets.
   */
  stored?: { status: number; headers: OutgoingHttpHeaders };
}

/** The value of a header field as one string, or undefined. */
function fieldValue(value: OutgoingHttpHeaders[string]): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/**
 * The pipeline's decision for the leader's response. `headers` are the handler's final fields
 * (lower-case names, this cache's `Dogpile-*` fields still on them, which go into `run`);
 * `capture` and `run` are set when the response is to be shared (`Exchange.proceed`); `storable` says whether the adapter can capture the body it has,
 * `bodySize` its length when known. In order: a stored response standing in for an origin
 * failure (`stale-if-error`; the capture fails, so waiters get the same), a handler's 304 that
 * renews the stored response (its client gets the renewed one), else the handler's response with
 * this cache's `X-Cache` and `Cache-Status`, as a 304 when the client's own conditional request
 * is satisfied by it.
 */
export function leaderHead<Req>(
  guard: HttpGuard<Req>,
  run: LeaderRun | undefined,
  capture: ResponseCapture | undefined,
  status: number,
  headers: OutgoingHttpHeaders,
  storable = true,
  bodySize?: number,
): LeaderHead {
  const targeted = fieldValue(headers['dogpile-cache-control']);
  const tagged = fieldValue(headers['dogpile-tags']);
  if (run !== undefined) {
    if (targeted !== undefined) run.targeted = targeted;
    if (tagged !== undefined) run.tagged = tagged;
  }
  const own: OutgoingHttpHeaders = {};
  const remove: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (isTargetedField(name)) remove.push(name);
    else if (name !== 'x-cache' && name !== 'cache-status') own[name] = value;
  }
  if (capture !== undefined && run !== undefined) {
    const stale = guard.staleOnError(run, status);
    if (stale !== undefined) {
      capture.fail(new LoaderError(`the handler answered ${status}; the stored response was served instead`, { key: run.plan.key }));
      const served = servedInstructions(stale);
      return { status: served.status, replaceAll: true, set: served.headers as LeaderHead['set'], remove: [], body: stale.body ?? Buffer.alloc(0) };
    }
    // A refresh answered with an origin failure is a failed run, as a loader that throws: the
    // key is held for failSafeRetry. Its client still gets the handler's response, stored nowhere.
    if (refreshFailed(run, status)) capture.fail(new LoaderError(`the handler answered ${status} to a refresh`, { key: run.plan.key }));
    const renewed = revalidated304(run, status, own, Date.now());
    if (renewed !== undefined) {
      const member = guard.leaderHeaders(run, 304, own);
      capture.complete(304, { ...renewed.headers });
      const set: LeaderHead['set'] = [...Object.entries(renewed.headers), ['x-cache', 'MISS'], ['cache-status', member]];
      return { status: renewed.status, replaceAll: true, set, remove: [], body: renewed.body };
    }
  }
  const member = guard.leaderHeaders(run, status, own, capture !== undefined && storable, bodySize);
  const set: LeaderHead['set'] = [
    ['x-cache', 'MISS'],
    ['cache-status', appendCacheStatus(headers['cache-status'] as string | string[] | undefined, member)],
  ];
  if (capture === undefined) return { status, replaceAll: false, set, remove, body: 'handler' };
  const stored = { status, headers: own };
  if (run === undefined || !leaderNotModified(run, status, own)) return { status, replaceAll: false, set, remove, body: 'handler', stored };
  // This client's conditional request is answered with a 304; the full response is still
  // captured and stored.
  for (const name of Object.keys(own)) if (isRepresentationHeader(name)) remove.push(name);
  return { status: 304, replaceAll: false, set, remove, body: 'none', stored };
}

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

/**
 * Statuses whose responses have no content (RFC 9110 §15.3.5, §15.3.6, §15.4.5): an adapter
 * sends no body with them (a `Response` refuses one).
 */
export function hasNoContent(status: number): boolean {
  return status === 204 || status === 205 || status === 304;
}

/** What the adapter sends to its client instead. */
export interface ClientAnswer {
  status: number;
  headers: OutgoingHttpHeaders;
  /** Nothing, bytes, or a stream that the adapter must send (or read to its end: it feeds the capture). */
  payload: null | string | Uint8Array | Readable;
}

/** The size of a payload in hand (bytes), or undefined for a stream. */
export function payloadSize(payload: unknown): number | undefined {
  if (payload === null || payload === undefined) return 0;
  if (typeof payload === 'string') return Buffer.byteLength(payload);
  if (payload instanceof Uint8Array) return payload.byteLength;
  return undefined;
}

/** Whether `capturePayload` can keep this payload (anything else is sent and not shared). */
export function capturable(payload: unknown): boolean {
  return payload === null || payload === undefined || typeof payload === 'string' || payload instanceof Uint8Array || payload instanceof Readable;
}

/**
 * Applies a `LeaderHead` to a payload in hand (Fastify's `onSend`, a `Response`'s body, Koa's
 * `ctx.body`): feeds the capture, and returns what this client is sent.
 */
export function leaderPayload(head: LeaderHead, capture: ResponseCapture | undefined, payload: unknown): unknown {
  if (head.body instanceof Buffer) {
    drain(payload);
    return head.body;
  }
  const sent = capture !== undefined && head.stored !== undefined ? capturePayload(capture, head.stored.status, head.stored.headers, payload) : payload;
  if (head.body === 'handler') return sent;
  drain(sent);
  return null;
}

/** Every `Dogpile-*` field off `headers` (read by this cache only, never sent). */
export function dropTargeted(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  for (const name of Object.keys(headers)) if (isTargetedField(name)) delete headers[name];
  return headers;
}

/** A header object with a `LeaderHead` applied. */
function headersAfter(head: LeaderHead, headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = head.replaceAll ? {} : { ...headers };
  for (const name of head.remove) delete out[name];
  for (const [name, value] of head.set) out[name] = value;
  return out;
}

/** True when the run refreshes a stored response (`run.fallback`) and the handler answered with an origin failure (500, 502, 503, 504). */
function refreshFailed(run: LeaderRun, status: number): boolean {
  return run.fallback !== undefined && ORIGIN_ERROR_STATUSES.has(status);
}

/**
 * The leader's handler answered (`capture` set when its response is to be shared): what its
 * client gets, for an adapter that has the whole response in hand.
 */
export function answerLeader<Req>(guard: HttpGuard<Req>, run: LeaderRun | undefined, capture: ResponseCapture | undefined, answer: HandlerAnswer): ClientAnswer {
  const { status, headers, payload } = answer;
  const head = leaderHead(guard, run, capture, status, headers, capturable(payload), payloadSize(payload));
  return { status: head.status, headers: headersAfter(head, headers), payload: leaderPayload(head, capture, payload) as ClientAnswer['payload'] };
}

/** A handler that failed (threw): its client gets the stored response `stale-if-error` allows, else the error goes on. */
export function answerLeaderError<Req>(guard: HttpGuard<Req>, run: LeaderRun | undefined, capture: ResponseCapture | undefined, error: unknown): ClientAnswer {
  if (capture === undefined || run === undefined) throw error;
  const stale = guard.staleOnError(run, 500);
  if (stale === undefined) {
    if (refreshFailed(run, 500)) capture.fail(new LoaderError('the handler failed during a refresh', { key: run.plan.key, cause: error }));
    else capture.complete(500, {});
    throw error;
  }
  capture.fail(new LoaderError('the handler failed; the stored response was served instead', { key: run.plan.key, cause: error }));
  const served = servedInstructions(stale);
  return { status: served.status, headers: Object.fromEntries(served.headers) as OutgoingHttpHeaders, payload: stale.body ?? null };
}

/**
 * Reads a stream that is not sent (a HEAD's body, a body replaced by the stored bytes) to its
 * end: its bytes may still feed a capture, which hears of a failure on its own. Nothing else
 * listens to it, so its `error` is taken here: unheard, it would end the process.
 */
export function drain(payload: unknown): void {
  if (!(payload instanceof Readable)) return;
  payload.on('error', ignore);
  payload.resume();
}

function ignore(): void {
  /* the capture, or nobody, needs this stream's failure */
}
