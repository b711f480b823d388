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
 * Version 3 (an entry with tags, or with stale windows of its own): version 2's header, then
 *   36..43 the entry's own staleWhileRevalidate window in ms (float64 BE; -1: the call's rule)
 *   44..51 the entry's own staleIfError window in ms (float64 BE; -1: the call's rule)
 *   52..53 the number of tags (uint16 BE), then each tag: its UTF-8 length (uint16 BE) and bytes
 *   ..    the serializer's bytes
 *
 * Version 4 (every value entry of a serializer with a name): version 2's header, then
 *   36..43 own staleWhileRevalidate window, 44..51 own staleIfError window, 52..53 the number of
 *          tags (as in version 3)
 *   54     the length of the serializer's name (1..64), then the name (ASCII)
 *   ..     the tags (as in version 3), then the serializer's bytes
 *
 * A compressed value entry (compression.ts) is a version 4 entry whose name is the serializer's
 * name, `;` (never in a serializer's name) and the algorithm, e.g. `portable;zstd` (`;gzip` for a
 * serializer without a name); its payload is the serializer's bytes compressed. A release that
 * predates compression reads that name as a serializer it does not have (an entry it cannot
 * read, not a corrupt one), and the layout (the scripts' bytes) is version 4's unchanged.
 *
 * Versions 1 to 3 name no serializer: they are read with the reader's (see `legacyReaderFor`).
 * The lookup script reads `expires at` at bytes 12..19 of a version 2, 3 or 4 entry, and the
 * scripts that write an entry rewrite bytes 4..35 (cache-scripts.ts): every version from 2 on
 * keeps them where version 2 has them.
 */
const ENTRY_MAGIC_0 = 0xd0;
const ENTRY_MAGIC_1 = 0x67;
const ENTRY_VERSION = 1;
const ENTRY_VERSION_2 = 2;
const ENTRY_VERSION_3 = 3;
const ENTRY_VERSION_4 = 4;
export const HEADER_SIZE = 20;
export const HEADER_SIZE_V2 = 36;
/** Version 3's fixed part, before its tags. */
export const HEADER_SIZE_V3 = 54;
/** Between the serializer's name and the compression algorithm in version 4's name field. */
const COMPRESSION_MARK = ';';

export const enum EntryKind {
  Value = 1,
  HitForMiss = 2,
}

interface DecodedEntry {
  kind: EntryKind;
  createdAt: number;
  ttl: number;
  /** How long the entry is kept past `ttl` (its longest stale window); 0 for version 1. */
  stale: number;
  /** The loader's duration in ms; 0 when not recorded (version 1). */
  delta: number;
  /** The entry's own stale windows (version 3; undefined: the call's rules apply). */
  revalidate?: number;
  staleIfError?: number;
  /** The entry's tags (version 3). */
  tags?: string[];
  /** The name of the serializer that wrote the payload (version 4; undefined: not named). */
  serializer?: string;
  /** The algorithm the payload is compressed with (version 4; undefined: not compressed). */
  compression?: string;
  payload: Buffer;
}

/**
 * The stale window, loader duration, own stale windows and tags of an entry (none of them: a
 * version 1 entry is written; a window or a duration: version 2; own windows or tags: version 3).
 */
interface EntryWindow {
  stale?: number;
  delta?: number;
  revalidate?: number | undefined;
  staleIfError?: number | undefined;
  tags?: readonly string[] | undefined;
  /** The name of the serializer of the payload: written as version 4 (`validSerializerName` holds). */
  serializer?: string | undefined;
  /** The algorithm the payload is compressed with: written as version 4, its name after the serializer's. */
  compression?: string | undefined;
}

export function encodeEntry(kind: EntryKind, createdAt: number, ttl: number, payload: Uint8Array, window: EntryWindow = {}): Buffer {
  const stale = window.stale ?? 0;
  const delta = window.delta ?? 0;
  const tags = window.tags ?? [];
  if (window.compression !== undefined) return encodeV3(kind, createdAt, ttl, payload, window, tags, Buffer.from(`${window.serializer ?? ''}${COMPRESSION_MARK}${window.compression}`, 'latin1'));
  if (window.serializer !== undefined) return encodeV3(kind, createdAt, ttl, payload, window, tags, Buffer.from(window.serializer, 'latin1'));
  if (tags.length > 0 || window.revalidate !== undefined || window.staleIfError !== undefined) return encodeV3(kind, createdAt, ttl, payload, window, tags);
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

/** Version 3, or version 4 with the serializer's `name`. */
function encodeV3(kind: EntryKind, createdAt: number, ttl: number, payload: Uint8Array, window: EntryWindow, tags: readonly string[], name?: Buffer): Buffer {
  const encoded = tags.map((tag) => Buffer.from(tag, 'utf8'));
  const tagBytes = encoded.reduce((sum, b) => sum + 2 + b.length, 0);
  const named = name === undefined ? 0 : 1 + name.length;
  const out = Buffer.allocUnsafe(HEADER_SIZE_V3 + named + tagBytes + payload.byteLength);
  out[0] = ENTRY_MAGIC_0;
  out[1] = ENTRY_MAGIC_1;
  out[2] = name === undefined ? ENTRY_VERSION_3 : ENTRY_VERSION_4;
  out[3] = kind;
  out.writeDoubleBE(createdAt, 4);
  out.writeDoubleBE(createdAt + ttl, 12);
  out.writeDoubleBE(createdAt + ttl + (window.stale ?? 0), 20);
  out.writeDoubleBE(window.delta ?? 0, 28);
  out.writeDoubleBE(window.revalidate ?? -1, 36);
  out.writeDoubleBE(window.staleIfError ?? -1, 44);
  out.writeUInt16BE(encoded.length, 52);
  let at = HEADER_SIZE_V3;
  if (name !== undefined) {
    out[at] = name.length;
    out.set(name, at + 1);
    at += named;
  }
  for (const b of encoded) {
    out.writeUInt16BE(b.length, at);
    out.set(b, at + 2);
    at += 2 + b.length;
  }
  out.set(payload, at);
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
  if (version !== ENTRY_VERSION && version !== ENTRY_VERSION_2 && version !== ENTRY_VERSION_3 && version !== ENTRY_VERSION_4) throw new CorruptEntryError(`unknown entry format version ${version}`);
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
  if (version === ENTRY_VERSION_2) return { kind, createdAt, ttl: expiresAt - createdAt, stale: staleUntil - expiresAt, delta, payload: bytes.subarray(HEADER_SIZE_V2) };
  if (bytes.length < HEADER_SIZE_V3) throw new CorruptEntryError('bad entry header');
  const revalidate = bytes.readDoubleBE(36);
  const staleIfError = bytes.readDoubleBE(44);
  if (!Number.isFinite(revalidate) || !Number.isFinite(staleIfError) || revalidate < -1 || staleIfError < -1) throw new CorruptEntryError('bad entry header');
  const count = bytes.readUInt16BE(52);
  const tags: string[] = [];
  let at = HEADER_SIZE_V3;
  let serializer: string | undefined;
  if (version === ENTRY_VERSION_4) {
    const length = bytes[at] ?? 0;
    if (length === 0 || at + 1 + length > bytes.length) throw new CorruptEntryError('bad serializer name');
    serializer = bytes.toString('latin1', at + 1, at + 1 + length);
    at += 1 + length;
  }
  for (let i = 0; i < count; i++) {
    if (at + 2 > bytes.length) throw new CorruptEntryError('bad entry tags');
    const length = bytes.readUInt16BE(at);
    if (at + 2 + length > bytes.length) throw new CorruptEntryError('bad entry tags');
    tags.push(bytes.toString('utf8', at + 2, at + 2 + length));
    at += 2 + length;
  }
  const decoded: DecodedEntry = { kind, createdAt, ttl: expiresAt - createdAt, stale: staleUntil - expiresAt, delta, payload: bytes.subarray(at) };
  if (revalidate >= 0) decoded.revalidate = revalidate;
  if (staleIfError >= 0) decoded.staleIfError = staleIfError;
  if (tags.length > 0) decoded.tags = tags;
  if (serializer !== undefined) {
    const mark = serializer.indexOf(COMPRESSION_MARK);
    if (mark < 0) decoded.serializer = serializer;
    else {
      if (mark > 0) decoded.serializer = serializer.slice(0, mark);
      decoded.compression = serializer.slice(mark + 1);
    }
  }
  return decoded;
}
