import { DogpileError } from '../../shared/errors.js';
import type { HeaderEntry } from './headers.js';

/**
 * A captured response as it is stored: one Buffer, no base64, the body bytes as they were
 * sent. All integers big-endian; strings are latin1 (what HTTP/1.1 puts on the wire, so
 * every header value Node accepts round-trips exactly).
 *
 *   0..1   magic 0x44 0x48 ("DH")
 *   2      format version (1)
 *   3      flags: bit 0 set when the freshness part follows the fixed part, bit 1 when the
 *          stale-if-error part follows that
 *   4..11  captured at, ms since the epoch (float64)
 *   12..13 status (uint16)
 *   14..15 number of header lines H (uint16)
 *   16..17 number of vary lines V (uint16)
 *   (flag 0) freshness: fresh for (ms from "captured at", float64), Age on arrival (s, float64)
 *   (flag 1) stale-if-error: the response's own window (ms, float64; 0 = never served stale)
 *   H ×    name length (uint16), name, value length (uint32), value   (a repeated header is
 *          stored as several lines with the same name)
 *   V ×    name length (uint16), name, present (uint8), value length (uint32), value: the
 *          request headers named by the response's `Vary`, as the request that produced the
 *          response sent them
 *   ..     the body, to the end of the buffer
 */
const MAGIC_0 = 0x44;
const MAGIC_1 = 0x48;
const VERSION = 1;
const FIXED = 18;
const FLAG_FRESHNESS = 1;
const FRESHNESS_SIZE = 16;
const FLAG_STALE_IF_ERROR = 2;
const STALE_IF_ERROR_SIZE = 8;

export interface StoredResponse {
  createdAt: number;
  status: number;
  /** Header name → value(s), names lower-case, without `Content-Length`. */
  headers: HeaderEntry[];
  /** The request headers named by `Vary`: name → value (undefined: the request did not send it). */
  vary: [name: string, value: string | undefined][];
  body: Buffer;
  /**
   * How long (ms from `createdAt`) the response is fresh, as its own headers said when it was
   * stored (RFC 9111 §4.2); undefined in entries written before it was recorded.
   */
  freshFor?: number;
  /** The `Age` (s) the response had when it was stored (RFC 9111 §4.2.3). */
  ageOnArrival?: number;
  /**
   * How long (ms) past its freshness the response's own headers let it be served when the
   * origin fails (`stale-if-error`, RFC 5861 §4); 0 when they forbid serving it stale
   * (`must-revalidate`, `proxy-revalidate`, `s-maxage`, `no-cache`); undefined when they say
   * nothing (the adapter's `staleIfError` applies).
   */
  staleIfError?: number;
}

/** Stored bytes that are not a response this library wrote. */
export class ResponseFormatError extends DogpileError {
  override readonly code = 'E_RESPONSE_FORMAT' as const;
}

export function encodeResponse(response: {
  createdAt: number;
  status: number;
  headers: readonly HeaderEntry[];
  vary: readonly (readonly [string, string | undefined])[];
  body: Buffer | readonly Buffer[];
  freshFor?: number;
  ageOnArrival?: number;
  staleIfError?: number;
}): Buffer {
  const freshness = response.freshFor !== undefined;
  const staleIfError = freshness && response.staleIfError !== undefined;
  const lines: [string, string][] = [];
  for (const [name, value] of response.headers) {
    if (Array.isArray(value)) for (const v of value) lines.push([name, v]);
    else lines.push([name, value as string]);
  }
  if (lines.length > 0xffff || response.vary.length > 0xffff) throw new ResponseFormatError('too many headers to store');
  const chunks = Buffer.isBuffer(response.body) ? [response.body] : (response.body as readonly Buffer[]);
  let bodySize = 0;
  for (const c of chunks) bodySize += c.length;
  let size = FIXED + (freshness ? FRESHNESS_SIZE : 0) + (staleIfError ? STALE_IF_ERROR_SIZE : 0) + bodySize;
  for (const [name, value] of lines) size += 6 + Buffer.byteLength(name, 'latin1') + Buffer.byteLength(value, 'latin1');
  for (const [name, value] of response.vary) size += 7 + Buffer.byteLength(name, 'latin1') + (value === undefined ? 0 : Buffer.byteLength(value, 'latin1'));

  const out = Buffer.allocUnsafe(size);
  out[0] = MAGIC_0;
  out[1] = MAGIC_1;
  out[2] = VERSION;
  out[3] = (freshness ? FLAG_FRESHNESS : 0) | (staleIfError ? FLAG_STALE_IF_ERROR : 0);
  out.writeDoubleBE(response.createdAt, 4);
  out.writeUInt16BE(response.status, 12);
  out.writeUInt16BE(lines.length, 14);
  out.writeUInt16BE(response.vary.length, 16);
  let at = FIXED;
  if (freshness) {
    out.writeDoubleBE(response.freshFor!, at);
    out.writeDoubleBE(response.ageOnArrival ?? 0, at + 8);
    at += FRESHNESS_SIZE;
  }
  if (staleIfError) {
    out.writeDoubleBE(response.staleIfError!, at);
    at += STALE_IF_ERROR_SIZE;
  }
  const writeString = (s: string, lengthBytes: 2 | 4) => {
    const n = Buffer.byteLength(s, 'latin1');
    if (lengthBytes === 2) {
      if (n > 0xffff) throw new ResponseFormatError('header name too long to store');
      out.writeUInt16BE(n, at);
    } else out.writeUInt32BE(n, at);
    at += lengthBytes;
    at += out.write(s, at, 'latin1');
  };
  for (const [name, value] of lines) {
    writeString(name, 2);
    writeString(value, 4);
  }
  for (const [name, value] of response.vary) {
    writeString(name, 2);
    out[at++] = value === undefined ? 0 : 1;
    writeString(value ?? '', 4);
  }
  for (const c of chunks) at += c.copy(out, at);
  return out;
}

/** Decodes a stored response; throws `ResponseFormatError` for anything else. The body is a view, not a copy. */
export function decodeResponse(bytes: Buffer): StoredResponse {
  if (bytes.length < FIXED || bytes[0] !== MAGIC_0 || bytes[1] !== MAGIC_1) throw new ResponseFormatError('not a stored response');
  if (bytes[2] !== VERSION) throw new ResponseFormatError(`unknown stored response version ${bytes[2]}`);
  const createdAt = bytes.readDoubleBE(4);
  const status = bytes.readUInt16BE(12);
  const headerLines = bytes.readUInt16BE(14);
  const varyLines = bytes.readUInt16BE(16);
  let at = FIXED;
  let freshFor: number | undefined;
  let ageOnArrival: number | undefined;
  if ((bytes[3]! & FLAG_FRESHNESS) !== 0) {
    if (bytes.length < FIXED + FRESHNESS_SIZE) throw new ResponseFormatError('truncated stored response');
    freshFor = bytes.readDoubleBE(at);
    ageOnArrival = bytes.readDoubleBE(at + 8);
    at += FRESHNESS_SIZE;
  }
  let staleIfError: number | undefined;
  if ((bytes[3]! & FLAG_FRESHNESS) !== 0 && (bytes[3]! & FLAG_STALE_IF_ERROR) !== 0) {
    if (bytes.length < at + STALE_IF_ERROR_SIZE) throw new ResponseFormatError('truncated stored response');
    staleIfError = bytes.readDoubleBE(at);
    at += STALE_IF_ERROR_SIZE;
  }
  const readString = (lengthBytes: 2 | 4): string => {
    if (at + lengthBytes > bytes.length) throw new ResponseFormatError('truncated stored response');
    const n = lengthBytes === 2 ? bytes.readUInt16BE(at) : bytes.readUInt32BE(at);
    at += lengthBytes;
    if (at + n > bytes.length) throw new ResponseFormatError('truncated stored response');
    const s = bytes.toString('latin1', at, at + n);
    at += n;
    return s;
  };
  const headers: HeaderEntry[] = [];
  const index = new Map<string, HeaderEntry>();
  for (let i = 0; i < headerLines; i++) {
    const name = readString(2);
    const value = readString(4);
    const seen = index.get(name);
    if (seen === undefined) {
      const entry: HeaderEntry = [name, value];
      index.set(name, entry);
      headers.push(entry);
    } else if (Array.isArray(seen[1])) seen[1].push(value);
    else seen[1] = [seen[1], value];
  }
  const vary: [string, string | undefined][] = [];
  for (let i = 0; i < varyLines; i++) {
    const name = readString(2);
    if (at >= bytes.length) throw new ResponseFormatError('truncated stored response');
    const present = bytes[at++] === 1;
    const value = readString(4);
    vary.push([name, present ? value : undefined]);
  }
  if (!Number.isFinite(createdAt) || status < 100 || status > 999) throw new ResponseFormatError('bad stored response header');
  const out: StoredResponse = { createdAt, status, headers, vary, body: bytes.subarray(at) };
  if (freshFor !== undefined) {
    out.freshFor = freshFor;
    out.ageOnArrival = ageOnArrival;
    if (staleIfError !== undefined && staleIfError >= 0) out.staleIfError = staleIfError;
  }
  return out;
}
