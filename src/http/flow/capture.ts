import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { AbandonedLoad } from '../../core/cache.js';
import type { CaptureSink, SharedResponse } from './capture-types.js';

export type { CaptureSink, SharedResponse } from './capture-types.js';
import { CACHE_DEFAULTS } from '../../core/options.js';
import { monotonicNow } from '../../shared/clock.js';
import { absorbWriteHeadHeaders, dropTargetedFields } from '../rules/targeted-fields.js';

export interface CapturedResponse {
  status: number;
  headers: OutgoingHttpHeaders;
  /** The body went over the size limit; `body` is then empty. */
  tooBig: boolean;
  body: Buffer[];
  /** When the handler started (the monotonic clock, `monotonicNow()`): what it computed counts from there. */
  startedAt: number;
}

/**
 * Collects the response that a route handler sends to the leader's client, and turns it into
 * the value the leader resolves with: the stored-response bytes, or null when the response
 * must not be shared (then every request waiting for it runs its own handler). It rejects with
 * `AbandonedLoad` when the handler produced no complete response after its client left (a
 * 5xx, a broken stream, no end in time) or on shutdown: the lead is handed back and one of
 * the waiting requests runs its handler instead.
 *
 * The leader's client hanging up changes nothing by itself: the handler is still running, and
 * what it goes on writing is still captured and shared.
 */
export class ResponseCapture<V = SharedResponse> implements CaptureSink {
  readonly promise: Promise<V | null>;
  private resolvePromise!: (value: V | null) => void;
  private rejectPromise!: (error: Error) => void;
  private chunks: Buffer[] = [];
  private size = 0;
  private tooBig = false;
  private done = false;
  private gone = false;
  /** When the handler started, on the monotonic clock. */
  readonly startedAt = monotonicNow();
  private giveUpTimer: NodeJS.Timeout | undefined;
  /**
   * The status and headers the handler gave its response, when its client was sent something
   * else (a 304 for its conditional request): what is stored is the handler's response.
   */
  original?: { status: number; headers: OutgoingHttpHeaders };

  /**
   * @param giveUpAfter How long after the handler started a leader whose client is gone may
   *   take to finish its response before the capture is abandoned (the guard passes the
   *   cache's `waitTimeout`, the time its waiters would wait anyway).
   */
  constructor(
    private readonly maxBodySize: number,
    private readonly finish: (response: CapturedResponse) => V | null,
    private readonly onSettle?: (capture: ResponseCapture<V>) => void,
    private readonly giveUpAfter: number = CACHE_DEFAULTS.waitTimeout,
  ) {
    this.promise = new Promise((resolve, reject) => {
      this.resolvePromise = resolve;
      this.rejectPromise = reject;
    });
  }

  get settled(): boolean {
    return this.done;
  }

  /** A piece of the body, as the handler wrote it. */
  push(chunk: unknown, encoding?: BufferEncoding): void {
    if (this.done || this.tooBig) return;
    let buf: Buffer;
    if (Buffer.isBuffer(chunk)) buf = chunk;
    else if (typeof chunk === 'string') buf = Buffer.from(chunk, encoding ?? 'utf8');
    else if (chunk instanceof Uint8Array) buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    else {
      this.share(null);
      return;
    }
    if (buf.length === 0) return;
    this.size += buf.length;
    if (this.size > this.maxBodySize) {
      this.tooBig = true;
      this.chunks = [];
      return;
    }
    this.chunks.push(buf);
  }

  /** True once the leader's client has gone away. */
  get clientLeft(): boolean {
    return this.gone;
  }

  /** The response is complete: decide, encode, and hand it to the waiting requests. */
  complete(status: number, headers: OutgoingHttpHeaders): void {
    if (this.done) return;
    // A failure after the client left may well be caused by the hang-up (an aborted query, a
    // premature close): it says nothing about what the others would get. One of them asks again.
    if (this.gone && status >= 500) {
      this.abandon();
      return;
    }
    let value: V | null;
    try {
      value = this.finish({ status, headers, tooBig: this.tooBig, body: this.chunks, startedAt: this.startedAt });
    } catch {
      value = null;
    }
    this.share(value);
  }

  /**
   * The body broke off (a stream error). With the client gone, that may be the hang-up's
   * doing: one waiter asks again. Otherwise it is the handler's answer, shared with nobody.
   */
  broken(): void {
    if (this.gone) this.abandon();
    else this.share(null);
  }

  /** The handler produced no complete response: one of the waiting requests runs its handler instead. */
  abandon(): void {
    this.settle(() => this.rejectPromise(new AbandonedLoad('the response could not be captured')));
  }

  /**
   * The leader's client went away. The handler goes on and its response is still captured
   * (the adapters keep reading piped and streamed bodies), but a handler that has not finished
   * `giveUpAfter` ms after it started is given up on.
   */
  clientGone(): void {
    if (this.done || this.gone) return;
    this.gone = true;
    const left = Math.max(0, this.startedAt + this.giveUpAfter - monotonicNow());
    this.giveUpTimer = setTimeout(() => this.abandon(), left);
    this.giveUpTimer.unref();
  }

  /**
   * The origin failed and its client was answered otherwise (a stale response): the run fails
   * with `error`, as a loader that throws, so the requests waiting for it get what the cache
   * answers a failed run with (the same stale response, under `staleIfError`).
   */
  fail(error: Error): void {
    this.settle(() => this.rejectPromise(error));
  }

  /** Settles with the bytes to share, or with null: the response goes to nobody else, and waiters run their own handler. */
  share(value: V | null): void {
    this.settle(() => this.resolvePromise(value));
  }

  private settle(deliver: () => void): void {
    if (this.done) return;
    this.done = true;
    this.chunks = [];
    if (this.giveUpTimer) clearTimeout(this.giveUpTimer);
    this.giveUpTimer = undefined;
    deliver();
    this.onSettle?.(this);
  }
}

type WriteFn = (...args: unknown[]) => boolean;
type EndFn = (...args: unknown[]) => unknown;
type WriteHeadFn = (...args: unknown[]) => unknown;

/**
 * The value of header `name` in the arguments of a `writeHead(status, [message], [headers])`
 * call (an object, a flat `[name, value, ...]` list or a list of pairs), or undefined.
 */
function writeHeadHeader(args: unknown[], name: string): unknown {
  const headers = args.find((arg, i) => i > 0 && arg !== null && typeof arg === 'object');
  if (headers === undefined) return undefined;
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      for (const pair of headers as unknown[][]) if (String(pair[0]).toLowerCase() === name) return pair[1];
    } else {
      for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() === name) return headers[i + 1];
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(headers as Record<string, unknown>)) if (k.toLowerCase() === name) return v;
  return undefined;
}

/**
 * Captures what is written to a Node `ServerResponse` (Express's `res` and anything built on
 * it: `res.send`, `res.json`, `res.write`/`res.end`, `res.writeHead`, `stream.pipe(res)`),
 * while it still goes to the client unchanged.
 */
export function captureServerResponse(res: ServerResponse, capture: CaptureSink): void {
  const write = res.write as unknown as WriteFn;
  const end = res.end as unknown as EndFn;
  const writeHead = res.writeHead as unknown as WriteHeadFn;
  const destroy = res.destroy as unknown as (...args: unknown[]) => unknown;
  // The captured bytes are those that pass this point, so what describes their encoding is
  // `Content-Encoding` and `Vary` as they are when the response passes this point: in
  // writeHead (with the headers given to it), or at the first write if that comes first. A
  // middleware wrapped around this capture (compression before the guard) sets them later,
  // also from inside writeHead, and encodes the bytes after they were captured: its headers
  // must not be stored with the unencoded copy, and it runs again on every hit. A middleware
  // between the capture and the handler (compression after the guard) has set them by then,
  // and the bytes captured are the encoded ones.
  let seen = false;
  let encoding: unknown;
  let vary: unknown;
  const see = (args?: unknown[]) => {
    if (seen) return;
    seen = true;
    encoding = (args && writeHeadHeader(args, 'content-encoding')) ?? res.getHeader('content-encoding');
    vary = (args && writeHeadHeader(args, 'vary')) ?? res.getHeader('vary');
  };
  (res as unknown as { writeHead: WriteHeadFn }).writeHead = function (this: ServerResponse, ...args: unknown[]): unknown {
    see(args);
    return writeHead.apply(this, args);
  };
  (res as unknown as { write: WriteFn }).write = function (this: ServerResponse, ...args: unknown[]): boolean {
    see();
    if (!capture.settled && args[0] != null) capture.push(args[0], typeof args[1] === 'string' ? (args[1] as BufferEncoding) : undefined);
    return write.apply(this, args);
  };
  (res as unknown as { end: EndFn }).end = function (this: ServerResponse, ...args: unknown[]): unknown {
    see();
    if (!capture.settled && args[0] != null && typeof args[0] !== 'function') {
      capture.push(args[0], typeof args[1] === 'string' ? (args[1] as BufferEncoding) : undefined);
    }
    const result = end.apply(this, args);
    // After end(): headers added by writeHead hooks (cookies) are in getHeaders(), so a
    // response sent with a Set-Cookie is never stored.
    if (!capture.settled) {
      const headers = res.getHeaders();
      if (capture.original) Object.assign(headers, capture.original.headers);
      setOrDelete(headers, 'content-encoding', encoding);
      setOrDelete(headers, 'vary', vary);
      // An encoded copy is served only to requests that send the same Accept-Encoding.
      const encoded = encoding !== undefined && encoding !== null && String(encoding).trim().toLowerCase() !== 'identity';
      if (encoded && !varyNames(vary).includes('accept-encoding') && !varyNames(vary).includes('*')) {
        headers.vary = vary === undefined ? 'Accept-Encoding' : `${headerString(vary)}, Accept-Encoding`;
      }
      capture.complete(capture.original?.status ?? res.statusCode, headers);
    }
    return result;
  };
  // The app destroys its own response before its end (`res.destroy()`, `stream.pipeline()` of
  // a source that fails): the handler's answer is broken, not a client gone, and nothing more
  // will come of it. A destroy after the client left changes nothing (the capture knows).
  (res as unknown as { destroy: typeof destroy }).destroy = function (this: ServerResponse, ...args: unknown[]): unknown {
    if (!capture.settled && !this.destroyed && !this.writableFinished) capture.broken();
    return destroy.apply(this, args);
  };
  watchClientGone(res, capture);
  keepReadingPipes(res, capture);
}

function headerString(value: unknown): string {
  return Array.isArray(value) ? value.join(', ') : String(value);
}

function varyNames(value: unknown): string[] {
  return value === undefined ? [] : headerString(value).split(',').map((s) => s.trim().toLowerCase());
}

function setOrDelete(headers: OutgoingHttpHeaders, name: string, value: unknown): void {
  if (value === undefined || value === null) delete headers[name];
  else headers[name] = Array.isArray(value) ? value.map(String) : typeof value === 'number' ? value : String(value);
}

/**
 * Tells the capture when `res` closes before the response is complete (the client left), or
 * that it has already. A response that finished (a HEAD answered with headers only while the
 * body it was given is still being read for the capture) is not a client gone.
 */
export function watchClientGone(res: ServerResponse, capture: CaptureSink): void {
  // Gone before the handler was reached (a slow middleware or hook ran first): 'close' is past.
  if (res.destroyed && !res.writableFinished) {
    capture.clientGone();
    return;
  }
  res.once('close', () => {
    if (!capture.settled && !res.writableFinished) capture.clientGone();
  });
}

/**
 * `source.pipe(res)` stops when `res` closes: the source is unpiped and paused, and the
 * response would never end. Once the client is gone, read every piped source to its end here
 * instead (its bytes go to the capture), then end the response as the pipe would have.
 * A source that is destroyed before its end abandons the capture (`stream.pipeline()` does
 * that to its source when the client leaves).
 */
function keepReadingPipes(res: ServerResponse, capture: CaptureSink): void {
  const sources = new Set<Readable>();
  const takeOver = (source: Readable) => {
    if (capture.settled || source.readableEnded) return;
    if (source.destroyed) {
      capture.broken();
      return;
    }
    source.unpipe(res);
    source.on('data', (chunk: unknown) => {
      if (!capture.settled) capture.push(chunk);
    });
    source.once('end', () => res.end());
    source.once('close', () => {
      if (!source.readableEnded) capture.broken();
    });
    source.resume();
  };
  res.on('pipe', (source: Readable) => {
    sources.add(source);
    // Piped after the client left: the pipe would stall at once.
    if (capture.clientLeft) process.nextTick(takeOver, source);
  });
  res.on('unpipe', (source: Readable) => {
    if (!capture.clientLeft) sources.delete(source);
  });
  res.once('close', () => {
    if (capture.settled) return;
    for (const source of sources) takeOver(source);
  });
}

/**
 * Calls `decorate` once, just before the response's headers are written (`writeHead`, which
 * Node also calls for an implicit header), with its status; `decorate` may still change the
 * headers with `res.setHeader` / `res.removeHeader`, and return another status to send. The
 * headers given to `writeHead` itself are set on `res` first, so `decorate` sees every one of
 * them; every `Dogpile-*` field left after `decorate` is dropped: none is ever sent.
 */
export function beforeHeaders(res: ServerResponse, decorate: (status: number) => number | void): void {
  const writeHead = res.writeHead as unknown as WriteHeadFn;
  let done = false;
  (res as unknown as { writeHead: WriteHeadFn }).writeHead = function (this: ServerResponse, ...args: unknown[]): unknown {
    if (!done) {
      done = true;
      absorbWriteHeadHeaders(this, args);
      try {
        const status = decorate(typeof args[0] === 'number' ? args[0] : this.statusCode);
        if (typeof status === 'number') args[0] = status;
      } catch {
        // Decorating is best effort: the response goes out as the handler made it.
      }
    }
    dropTargetedFields(this, args);
    return writeHead.apply(this, args);
  };
}

/** Representation headers a 304 does not carry (RFC 9110 §15.4.5). */
export function isRepresentationHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('content-') && lower !== 'content-location' || lower === 'transfer-encoding';
}
