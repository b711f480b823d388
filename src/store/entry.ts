import { DogpileError } from '../shared/errors.js';

/**
 * The bytes stored under a key in the shared store:
 *
 *   0..1  magic 0xD0 0x67       (anything else is a foreign value: a miss, reported as corrupt)
 *   2     format version (1)
 *   3     kind: 1 = value, 2 = hit-for-miss marker (the last result was not cacheable)
 *   4..11 created at, ms since the epoch (float64 BE)
 *   12..19 ttl in ms (float64 BE)
 *   20..  the serializer's bytes (empty for a marker)
 */
export const ENTRY_MAGIC_0 = 0xd0;
export const ENTRY_MAGIC_1 = 0x67;
export const ENTRY_VERSION = 1;
export const HEADER_SIZE = 20;

export const enum EntryKind {
  Value = 1,
  HitForMiss = 2,
}

export interface DecodedEntry {
  kind: EntryKind;
  createdAt: number;
  ttl: number;
  payload: Buffer;
}

export function encodeEntry(kind: EntryKind, createdAt: number, ttl: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_SIZE + payload.byteLength);
  out[0] = ENTRY_MAGIC_0;
  out[1] = ENTRY_MAGIC_1;
  out[2] = ENTRY_VERSION;
  out[3] = kind;
  out.writeDoubleBE(createdAt, 4);
  out.writeDoubleBE(ttl, 12);
  out.set(payload, HEADER_SIZE);
  return out;
}

/** Bytes under a cache key that this library did not write (or cannot read): a miss, reported as `corrupt`. */
export class CorruptEntryError extends DogpileError {
  override readonly code = 'E_CORRUPT_ENTRY' as const;
}

/** Decodes the header; throws `CorruptEntryError` for anything this library did not write. */
export function decodeEntry(bytes: Buffer): DecodedEntry {
  if (bytes.length < HEADER_SIZE || bytes[0] !== ENTRY_MAGIC_0 || bytes[1] !== ENTRY_MAGIC_1) {
    throw new CorruptEntryError('not an entry written by dogpile-guard');
  }
  if (bytes[2] !== ENTRY_VERSION) throw new CorruptEntryError(`unknown entry format version ${bytes[2]}`);
  const kind = bytes[3] as EntryKind;
  if (kind !== EntryKind.Value && kind !== EntryKind.HitForMiss) throw new CorruptEntryError(`unknown entry kind ${kind}`);
  const createdAt = bytes.readDoubleBE(4);
  const ttl = bytes.readDoubleBE(12);
  if (!Number.isFinite(createdAt) || !Number.isFinite(ttl)) throw new CorruptEntryError('bad entry header');
  return { kind, createdAt, ttl, payload: bytes.subarray(HEADER_SIZE) };
}
