/**
 * The contract between the HTTP caching pipeline and the adapters built on it (Express,
 * Fastify, Nest; a web-standard `fetch` handler, Hono, Koa). Nothing here names a framework or
 * Node's `IncomingMessage` / `ServerResponse`: an adapter describes its request as an
 * `HttpRequestInfo` (guard.ts), hands the handler's response over as a `HandlerResponse`, applies the
 * `ResponseInstructions` it gets back, and, for a refresh no client waits for, runs its handler
 * for a `ReplayRequest` (`Replay`).
 */
import type { PreparedResponse } from './flow/serve.js';

/** Request or response header fields: lower-case names (as Node gives them), one value or several. */
type HeaderFields = Readonly<Record<string, string | readonly string[] | number | undefined>>;

/**
 * What an adapter writes to its client: the whole response, decided by the pipeline. An
 * adapter that has already let the handler set headers removes `remove` first, then sets
 * `headers` (replacing values of the same name), then sends `status` and `body`.
 */
interface ResponseInstructions {
  status: number;
  /** Header fields to set, lower-case names, in order. */
  headers: ReadonlyArray<readonly [name: string, value: string | readonly string[]]>;
  /** Header fields to remove from what the handler or framework set (lower-case names). */
  remove: readonly string[];
  /**
   * The body, or undefined for none (a 304). For a HEAD request it is the GET body, whose
   * length the `content-length` header gives; the adapter sends headers only.
   */
  body: Uint8Array | undefined;
}

/**
 * A response the route's handler produced, as the adapter hands it to the pipeline: final
 * status and header fields (after every hook that runs after the handler), and the body as the
 * handler sent it. A body that cannot be read as bytes (`undefined` chunks are skipped) is not
 * stored.
 */
export interface HandlerResponse {
  status: number;
  headers: HeaderFields;
  /** The body's pieces, in order; an async iterable for a body still being produced. */
  body: Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>;
}

/**
 * The request a background refresh runs the route's handler with: reconstructed from the
 * stored response, with no client behind it. `headers` holds exactly: `host`; the forwarding
 * fields the key was built from (when the request that stored the response had them); the
 * fields the stored response's `Vary` names, with the values it was stored for; the `replayHeaders`
 * the user listed, with the values of the request that found the response stale; and, for a
 * conditional refresh, `if-none-match` / `if-modified-since` from the stored response's
 * validators. Never a cookie, `authorization` or any other field of the live request.
 */
export interface ReplayRequest {
  method: 'GET';
  url: string;
  headers: Readonly<Record<string, string>>;
}

/**
 * Runs the route's handler (through every hook, guard and middleware in front of it, as the
 * framework would for a request from a client) for `request`, and resolves with its response
 * once it is complete. The adapter marks the request so that the cache in front of the handler
 * lets it through without a lookup (`isReplay`-style marking stays inside the adapter; no field
 * of the request carries it to the handler). A rejection, like a 5xx, is a failed refresh: the
 * stale response keeps being served under `staleIfError` and retries are held for
 * `failSafeRetry`.
 *
 * Express, Fastify, Koa and Nest: a request and response made in memory, with the stored
 * target byte for byte, dispatched into the app's own listener (`injectTarget`). A `fetch`
 * handler: a new `Request`.
 */
export type Replay = (request: ReplayRequest) => Promise<HandlerResponse>;

/**
 * How a stored response past its freshness, inside its stale window, is refreshed:
 * - `'background'`: every request is answered with it at once; one refresh runs fleet-wide,
 *   detached from any client, through the adapter's `Replay` (the default);
 * - `'foreground'`: the request that wins the refresh runs its own handler and waits for it
 *   (`X-Cache: MISS`); the others get the stale response.
 */
export type RefreshMode = 'background' | 'foreground';

/** The instructions of a prepared response, made once per prepared response (a hit of the same second reuses it). */
const INSTRUCTIONS = Symbol('instructions');
/** The header fields of a prepared response as one plain record, made once per prepared response. */
const FIELD_RECORD = Symbol('field record');
/** The header fields of a prepared response as one record for Node's `writeHead`, made once per prepared response. */
const NODE_FIELDS = Symbol('node fields');

type Memo = PreparedResponse & {
  [INSTRUCTIONS]?: ResponseInstructions;
  [FIELD_RECORD]?: Readonly<Record<string, string>>;
  [NODE_FIELDS]?: Readonly<Record<string, string | readonly string[]>>;
};

/** The instructions that write a response served from the cache (a hit, a stale response, a 304, a 206). Shared: do not modify. */
export function servedInstructions(response: PreparedResponse): ResponseInstructions {
  const memo = response as Memo;
  const made = memo[INSTRUCTIONS];
  if (made !== undefined) return made;
  const headers: [string, string | readonly string[]][] = [...response.headers];
  headers.push(['x-cache', response.xCache], ['age', String(response.age)]);
  if (response.cacheStatus) headers.push(['cache-status', response.cacheStatus]);
  const instructions: ResponseInstructions = { status: response.status, headers, remove: [], body: response.body };
  memo[INSTRUCTIONS] = instructions;
  return instructions;
}

/** The header fields of `servedInstructions(response)` as one record, repeated values joined with `, ` (a `Response`'s init). Shared: do not modify. */
export function servedFieldRecord(response: PreparedResponse): Readonly<Record<string, string>> {
  const memo = response as Memo;
  const made = memo[FIELD_RECORD];
  if (made !== undefined) return made;
  const record: Record<string, string> = {};
  for (const [name, value] of servedInstructions(response).headers) record[name] = typeof value === 'string' ? value : value.join(', ');
  memo[FIELD_RECORD] = record;
  return record;
}

/**
 * The header fields of `servedInstructions(response)` as one record in their order, repeated
 * values kept as lists: what a Node `ServerResponse.writeHead` takes (a record rather than a
 * flat list, which some `writeHead` wrappers of the ecosystem read as pairs). Shared: do not modify.
 */
export function servedNodeFields(response: PreparedResponse): Readonly<Record<string, string | readonly string[]>> {
  const memo = response as Memo;
  const made = memo[NODE_FIELDS];
  if (made !== undefined) return made;
  const record: Record<string, string | readonly string[]> = {};
  for (const [name, value] of servedInstructions(response).headers) record[name] = value;
  memo[NODE_FIELDS] = record;
  return record;
}

/** Reads a handler response's body to its end: its pieces as bytes (none past `maxBytes`: `tooBig`); rejects when it breaks off. */
export async function collectBody(body: HandlerResponse['body'], maxBytes: number): Promise<{ chunks: Buffer[]; tooBig: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let tooBig = false;
  for await (const piece of body as AsyncIterable<Uint8Array | string>) {
    if (tooBig) continue;
    const buf = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    size += buf.length;
    if (size > maxBytes) {
      tooBig = true;
      chunks.length = 0;
      continue;
    }
    if (buf.length > 0) chunks.push(buf);
  }
  return { chunks, tooBig };
}
