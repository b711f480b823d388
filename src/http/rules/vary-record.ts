import type { IncomingHttpHeaders } from 'node:http';
import { randomBytes } from 'node:crypto';
import { varyKeySuffix } from './cache-key.js';

/**
 * What a URL's responses vary on, stored in the shared cache under the URL's own key (the key
 * without a `Vary` part) in place of a response: every process that looks the URL up finds
 * the request header names, and the generation that the keys of its stored variants carry.
 * Deleting the record (invalidation) orphans every variant at once: the next one stored gets
 * a new generation. Bytes: "DV", then JSON `{ "names": [...], "gen": "..." }`.
 */
export interface VaryRecord {
  /** Request header names, lower-case, sorted. */
  names: readonly string[];
  /** Changes whenever the record is written anew, so that older variants are never found. */
  gen: string;
}

const MAGIC = Buffer.from('DV');

export function encodeVaryRecord(record: VaryRecord): Buffer {
  return Buffer.concat([MAGIC, Buffer.from(JSON.stringify({ names: record.names, gen: record.gen }), 'utf8')]);
}

/** The record in a cached value, or undefined when the value is not one. */
export function toVaryRecord(value: unknown): VaryRecord | undefined {
  let bytes: Buffer;
  if (Buffer.isBuffer(value)) bytes = value;
  else if (value instanceof Uint8Array) bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  else if (value !== null && typeof value === 'object' && (value as { type?: unknown }).type === 'Buffer' && Array.isArray((value as { data?: unknown }).data)) {
    bytes = Buffer.from((value as { data: number[] }).data);
  } else return undefined;
  if (bytes.length < 2 || bytes[0] !== MAGIC[0] || bytes[1] !== MAGIC[1]) return undefined;
  try {
    const parsed = JSON.parse(bytes.toString('utf8', 2)) as { names?: unknown; gen?: unknown };
    if (!Array.isArray(parsed.names) || !parsed.names.every((n) => typeof n === 'string') || typeof parsed.gen !== 'string') return undefined;
    return { names: parsed.names as string[], gen: parsed.gen };
  } catch {
    return undefined;
  }
}

export function newGeneration(): string {
  return randomBytes(6).toString('base64url');
}

/** The key of one variant: the URL's key, the request's values of the `Vary` names, the generation. */
export function variantKey(base: string, record: VaryRecord, headers: IncomingHttpHeaders): string {
  return `${base}${varyKeySuffix(record.names, headers)}\n${record.gen}`;
}
