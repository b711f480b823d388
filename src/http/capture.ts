import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable, Transform, pipeline } from 'node:stream';

/**
 * When the leader's client hangs up before its response has started, the handler usually
 * still finishes and its response is still captured for the requests waiting on it. A handler
 * that gives up instead (it watches `req.on('close')`) would leave them waiting, so the
 * capture is abandoned this long after the hang-up, and the waiters run their own handler.
 */
export const ABORTED_LEADER_GRACE_MS = 2000;

export interface CapturedResponse {
  status: number;
  headers: OutgoingHttpHeaders;
  /** The body went over the size limit; `body` is then empty. */
  tooBig: boolean;
  body: Buffer[];
}

/**
 * Collects the response that a route handler sends to the leader's client, and turns it into
 * the value the leader resolves with: the stored-response bytes, or null when the response
 * must not be shared (then every request waiting for it runs its own handler).
 *
 * It settles exactly once: when the response is complete, when it cannot be completed (client
 * gone mid-body, stream error), or when the adapter shuts down.
 */
export class ResponseCapture {
  readonly promise: Promise<Buffer | null>;
  private resolvePromise!: (value: Buffer | null) => void;
  private chunks: Buffer[] = [];
  private size = 0;
  private tooBig = false;
  private done = false;
  private graceTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxBodySize: number,
    private readonly finish: (response: CapturedResponse) => Buffer | null,
    private readonly onSettle?: (capture: ResponseCapture) => void,
  ) {
    this.promise = new Promise((resolve) => {
      this.resolvePromise = resolve;
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
      this.abandon();
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

  /** The response is complete: decide, encode, and hand it to the waiting requests. */
  complete(status: number, headers: OutgoingHttpHeaders): void {
    if (this.done) return;
    let value: Buffer | null;
    try {
      value = this.finish({ status, headers, tooBig: this.tooBig, body: this.chunks });
    } catch {
      value = null;
    }
    this.settle(value);
  }

  /** The response cannot be captured: waiters run their own handler. */
  abandon(): void {
    this.settle(null);
  }

  /**
   * The client of the leader went away. Mid-body, the rest will not come (pipes are unpiped,
   * streams destroyed): give up now. Before the response started, give the handler
   * `ABORTED_LEADER_GRACE_MS` to finish.
   */
  clientGone(responseStarted: boolean): void {
    if (this.done || this.graceTimer) return;
    if (responseStarted) {
      this.abandon();
      return;
    }
    this.graceTimer = setTimeout(() => this.abandon(), ABORTED_LEADER_GRACE_MS);
    this.graceTimer.unref();
  }

  private settle(value: Buffer | null): void {
    if (this.done) return;
    this.done = true;
    this.chunks = [];
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    this.resolvePromise(value);
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
export function captureServerResponse(res: ServerResponse, capture: ResponseCapture): void {
  const write = res.write as unknown as WriteFn;
  const end = res.end as unknown as EndFn;
  const writeHead = res.writeHead as unknown as WriteHeadFn;
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
      setOrDelete(headers, 'content-encoding', encoding);
      setOrDelete(headers, 'vary', vary);
      // An encoded copy is served only to requests that send the same Accept-Encoding.
      const encoded = encoding !== undefined && encoding !== null && String(encoding).trim().toLowerCase() !== 'identity';
      if (encoded && !varyNames(vary).includes('accept-encoding') && !varyNames(vary).includes('*')) {
        headers.vary = vary === undefined ? 'Accept-Encoding' : `${headerString(vary)}, Accept-Encoding`;
      }
      capture.complete(res.statusCode, headers);
    }
    return result;
  };
  watchClientGone(res, capture);
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
 * Abandons (or starts the grace period of) the capture if `res` closes before it completes.
 * A response that finished (a HEAD answered with headers only while the body it was given is
 * still being read for the capture) is not a client gone.
 */
export function watchClientGone(res: ServerResponse, capture: ResponseCapture): void {
  res.once('close', () => {
    if (!capture.settled && !res.writableFinished) capture.clientGone(res.headersSent);
  });
}

/**
 * Captures a payload handed over in one piece (Fastify's `onSend`): a string, a Buffer, nothing,
 * or a Node stream, which is returned wrapped in a pass-through that copies what flows by.
 * Anything else (a web `ReadableStream`, a `Response`) is sent as it is and not shared.
 */
export function capturePayload(capture: ResponseCapture, status: number, headers: OutgoingHttpHeaders, payload: unknown): unknown {
  if (payload === null || payload === undefined) {
    capture.complete(status, headers);
    return payload;
  }
  if (typeof payload === 'string' || payload instanceof Uint8Array) {
    capture.push(payload);
    capture.complete(status, headers);
    return payload;
  }
  if (payload instanceof Readable) {
    const tee = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        capture.push(chunk);
        callback(null, chunk);
      },
      flush(callback) {
        capture.complete(status, headers);
        callback();
      },
    });
    pipeline(payload, tee, (err) => {
      if (err) capture.abandon();
    });
    tee.once('close', () => {
      if (!capture.settled) capture.abandon();
    });
    return tee;
  }
  capture.abandon();
  return payload;
}
