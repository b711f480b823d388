import { DogpileError } from '../shared/errors.js';

/**
 * The bytes stored under a key in the shared store. Two versions, read alike:
 *
 * Version 1 (an entry with no stale window and no loader duration; still written for those,
 * so processes of an older release keep reading them):
 *   0..1  magic 0xD0 0x67       (anything else is a foreign value: a miss, reported as corrupt)
 *   2     format version (1)
 *   3     kind: 1 = value, 2 = hit-for-miss marker (the last result was not cacheable)
 *   4..11 created at, ms since the epoch (float64 BE)
 *   12..19 ttl in ms (float64 BE)
 *   20..  the serializer's bytes (empty for a marker)
 *
 * Version 2 (an entry with a stale window or a loader duration):
 *   0..1  magic, 2 version (2), 3 kind
 *   4..11  created at (float64 BE, ms since the epoch)
 *   12..19 expires at: fresh until (float64 BE, ms since the epoch)
 *   20..27 stale until: the end of the longest stale window (float64 BE, ms since the epoch)
 *   28..35 Δ, the loader's duration in ms (float64 BE)
 *   36..  the serializer's bytes
 *
 * The lookup script reads `expires at` at bytes 12..19 of a version 2 entry (cache-scripts.ts).
 */
export const ENTRY_MAGIC_0 = 0xd0;
export const ENTRY_MAGIC_1 = 0x67;
export const ENTRY_VERSION = 1;
export const ENTRY_VERSION_2 = 2;
export const HEADER_SIZE = 20;
export const HEADER_SIZE_V2 = 36;

export const enum EntryKind {
  Value = 1,
  HitForMiss = 2,
}

export interface DecodedEntry {
  kind: EntryKind;
  createdAt: number;
  ttl: number;
  /** How long the entry is kept past `ttl` (its longest stale window); 0 for version 1. */
  stale: number;
  /** The loader's duration in ms; 0 when not recorded (version 1). */
  delta: number;
  payload: Buffer;
}

/** The stale window and loader duration of an entry (both 0: a version 1 entry is written). */
export interface EntryWindow {
  stale?: number;
  delta?: number;
}

export function encodeEntry(kind: EntryKind, createdAt: number, ttl: number, payload: Uint8Array, window: EntryWindow = {}): Buffer {
  const stale = window.stale ?? 0;
  const delta = window.delta ?? 0;
  const v2 = stale > 0 || delta > 0;
  const header = v2 ? HEADER_SIZE_V2 : HEADER_SIZE;
  const out = Buffer.allocUnsafe(header + payload.byteLength);
  out[0] = ENTRY_MAGIC_0;
  out[1] = ENTRY_MAGIC_1;
  out[2] = v2 ? ENTRY_VERSION_2 : ENTRY_VERSION;
  out[3] = kind;
  out.writeDoubleBE(createdAt, 4);
  if (v2) {
    out.writeDoubleBE(createdAt + ttl, 12);
    out.writeDoubleBE(createdAt + ttl + stale, 20);
    out.writeDoubleBE(delta, 28);
  } else {
    out.writeDoubleBE(ttl, 12);
  }
  out.set(payload, header);
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
  const version = bytes[2];
  if (version !== ENTRY_VERSION && version !== ENTRY_VERSION_2) throw new CorruptEntryError(`unknown entry format version ${version}`);
  const kind = bytes[3] as EntryKind;
  if (kind !== EntryKind.Value && kind !== EntryKind.HitForMiss) throw new CorruptEntryError(`unknown entry kind ${kind}`);
  const createdAt = bytes.readDoubleBE(4);
  if (version === ENTRY_VERSION) {
    const ttl = bytes.readDoubleBE(12);
    if (!Number.isFinite(createdAt) || !Number.isFinite(ttl)) throw new CorruptEntryError('bad entry header');
    return { kind, createdAt, ttl, stale: 0, delta: 0, payload: bytes.subarray(HEADER_SIZE) };
  }
  if (bytes.length < HEADER_SIZE_V2) throw new CorruptEntryError('bad entry header');
  const expiresAt = bytes.readDoubleBE(12);
  const staleUntil = bytes.readDoubleBE(20);
  const delta = bytes.readDoubleBE(28);
  if (![createdAt, expiresAt, staleUntil, delta].every(Number.isFinite) || expiresAt < createdAt || staleUntil < expiresAt || delta < 0) {
    throw new CorruptEntryError('bad entry header');
  }
  return { kind, createdAt, ttl: expiresAt - createdAt, stale: staleUntil - expiresAt, delta, payload: bytes.subarray(HEADER_SIZE_V2) };
}
