import { IncomingMessage, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { HandlerResponse } from '../pipeline.js';
import { LoaderError } from '../../shared/errors.js';

/** A `node:http` request listener (an app's, or a dispatch of the adapter's own). */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => void;

/** The request of a synthetic exchange: no body, no client behind it. */
interface SyntheticRequest {
  method: string;
  /** The request target, given to the app as `req.url` byte for byte. */
  url: string;
  /** Header fields sent, in order; an array is one field sent several times, `undefined` is not sent. */
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
}

/**
 * The connection of a synthetic exchange: what a request and its response read of their
 * socket (a loopback peer, timeouts that a refresh does not need), and a sink for the bytes
 * Node would send, which are dropped (the response's body is kept where the app writes it).
 * It never asks for a drain, so a body piped into the response never pauses.
 */
class SyntheticSocket extends Writable {
  readonly remoteAddress = '127.0.0.1';
  readonly remoteFamily = 'IPv4';
  readonly remotePort = 0;
  readonly localAddress = '127.0.0.1';
  readonly localPort = 0;

  constructor() {
    super({ highWaterMark: Number.MAX_SAFE_INTEGER, decodeStrings: false });
  }

  override _write(_chunk: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    callback();
  }

  address(): { address: string; family: string; port: number } {
    return { address: this.localAddress, family: 'IPv4', port: this.localPort };
  }

  setTimeout(): this {
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  ref(): this {
    return this;
  }

  unref(): this {
    return this;
  }
}

/** The bytes of one `write`/`end` chunk, copied (the app may reuse its buffer once the call returns). */
function chunkBytes(chunk: unknown, encoding: unknown): Buffer | undefined {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk);
  return undefined;
}

/** The response's header fields as they go out: every value text, as a client reads it. */
function sentFields(res: ServerResponse): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(res.getHeaders())) {
    if (value !== undefined) fields[name] = Array.isArray(value) ? value.map(String) : String(value);
  }
  return fields;
}

/**
 * Runs `listener` on a request and response made here, as Node's HTTP server would make them
 * for a client, with no socket and no server: an `IncomingMessage` with `request`'s method,
 * target (`req.url`, byte for byte) and header fields (`rawHeaders`; Node builds `headers`
 * from them), no body and already complete; and a `ServerResponse` for it whose status, header
 * fields (set by `setHeader`, `appendHeader` or `writeHead`, as text) and body bytes (`write`, `end`, a
 * stream piped into it) are kept in memory. Resolves when the response has finished; rejects
 * when the app destroys the response (or its socket) before it finished, or the listener throws.
 */
export function runSyntheticExchange(listener: NodeListener, request: SyntheticRequest): Promise<HandlerResponse> {
  const socket = new SyntheticSocket();
  const req = new IncomingMessage(socket as never);
  req.method = request.method;
  req.url = request.url;
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  const rawHeaders: string[] = [];
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    if (typeof value === 'string') rawHeaders.push(name, value);
    else for (const one of value) rawHeaders.push(name, one);
  }
  // As Node's HTTP parser hands a request its fields: `rawHeaders`, and `headers` built from them by Node's own rules.
  (req as IncomingMessage & { _addHeaderLines(fields: string[], count: number): void })._addHeaderLines(rawHeaders, rawHeaders.length);
  req.complete = true;
  req.push(null);

  const res = new ServerResponse(req);
  // With a header store present, `writeHead(status, fields)` adds its fields to it (Node
  // otherwise sends them without keeping them), so `getHeaders()` holds every field sent.
  res.setHeader('x-synthetic', '');
  res.removeHeader('x-synthetic');
  res.assignSocket(socket as never);

  const chunks: Buffer[] = [];
  const keep = (chunk: unknown, encoding: unknown) => {
    const bytes = chunkBytes(chunk, encoding);
    if (bytes !== undefined && bytes.length > 0) chunks.push(bytes);
  };
  const write = res.write;
  const end = res.end;
  // Own properties, so that an app giving the response its own prototype (Express) still writes here.
  res.write = function (this: ServerResponse, chunk: unknown, encoding?: unknown, callback?: unknown) {
    const open = !this.writableEnded && !this.destroyed;
    const accepted = (write as (...args: unknown[]) => boolean).call(this, chunk, encoding, callback);
    if (open) keep(chunk, encoding);
    return accepted;
  } as ServerResponse['write'];
  res.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) {
    const open = !this.writableEnded && !this.destroyed;
    (end as (...args: unknown[]) => ServerResponse).call(this, chunk, encoding, callback);
    if (open && typeof chunk !== 'function') keep(chunk, encoding);
    return this;
  } as ServerResponse['end'];

  return new Promise<HandlerResponse>((resolve, reject) => {
    let settled = false;
    let failure: unknown;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      reject(error instanceof Error ? error : new LoaderError('the app closed the response before it finished', { cause: error }));
    };
    // An error after the response finished has nowhere to go: kept off the process's unhandled errors.
    socket.on('error', (error) => (failure ??= error));
    res.on('error', (error) => (failure ??= error));
    res.once('finish', () => {
      if (settled) return;
      settled = true;
      resolve({ status: res.statusCode, headers: sentFields(res), body: chunks });
      // As Node's server does once a response is sent: the response closes, the request is read to its end.
      res.detachSocket(socket as never);
      process.nextTick(() => {
        res.destroyed = true;
        res.emit('close');
        if (!req.readableEnded) req.resume();
        socket.destroy();
      });
    });
    // The socket closing first (the app destroyed the response or its socket) closes the response.
    res.once('close', () => {
      if (settled) return;
      if (!req.destroyed) req.destroy();
      fail(failure ?? new LoaderError('the app closed the response before it finished'));
    });
    try {
      listener(req, res);
    } catch (error) {
      fail(error);
      res.destroy();
    }
  });
}
