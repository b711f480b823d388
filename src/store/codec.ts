import { InvalidOptionError, SerializationError, UnknownSerializerError } from '../shared/errors.js';
import { compress, decompress, type ResolvedCompression } from './compression.js';
import { CorruptEntryError, decodeEntry, encodeEntry, EntryKind } from './entry.js';
import { legacyReaderFor, readerFor, validSerializerName, type Serializer } from './serializer.js';
import { recordSize } from './entry-size.js';
import type { StoredEntry } from './types.js';

const EMPTY = Buffer.alloc(0);

/**
 * Stored entries to bytes and back: the entry format (entry.ts) around the serializer's bytes.
 * A value entry names its serializer (when it has a name); an entry named after a serializer
 * this process cannot read decodes to an `UnknownSerializerError`, not to a corrupt value.
 * With `compression`, serializer bytes longer than its threshold are stored compressed (when
 * that makes them shorter); compressed entries are read whatever this process's setting.
 * The size recorded for an entry (the L1's `maxSize`) is its bytes before compression: about
 * what its decoded value takes in memory, not the fewer bytes Redis holds.
 */
export class EntryCodec {
  private readonly legacy: Serializer;

  constructor(
    private readonly serializer: Serializer,
    private readonly compression?: ResolvedCompression,
  ) {
    if (serializer.name !== undefined && !validSerializerName(serializer.name)) {
      throw new InvalidOptionError('serializer', `its name must be 1 to 64 characters of A-Z a-z 0-9 . _ : @ / + -, got ${JSON.stringify(serializer.name)}`);
    }
    this.legacy = legacyReaderFor(serializer);
  }

  /** The name written into value entries (undefined: none). */
  get name(): string | undefined {
    return this.serializer.name;
  }

  /** The bytes of `entry`; throws `SerializationError` (naming `key`) when its value cannot be serialised. */
  encode(key: string, entry: StoredEntry): Buffer {
    if (entry.kind === EntryKind.HitForMiss) return encodeEntry(entry.kind, entry.createdAt, entry.ttl, EMPTY);
    const window = { stale: entry.stale ?? 0, delta: entry.delta ?? 0, revalidate: entry.revalidate, staleIfError: entry.staleIfError, tags: entry.tags, serializer: this.serializer.name, compression: undefined as string | undefined };
    let payload: Uint8Array;
    try {
      payload = this.serializer.serialize(entry.value);
    } catch (error) {
      throw new SerializationError(`the value for "${key}" cannot be serialised: ${errorMessage(error)}`, { key, cause: error });
    }
    if (!(payload instanceof Uint8Array)) {
      throw new SerializationError(`the serializer returned ${typeof payload} for "${key}"; serialize() must return a Buffer or Uint8Array`, { key });
    }
    const plain = payload.byteLength;
    const compression = this.compression;
    if (compression !== undefined && plain > compression.threshold) {
      const packed = compress(compression.algorithm, payload);
      if (packed !== undefined && packed.byteLength < plain) {
        payload = packed;
        window.compression = compression.algorithm;
      }
    }
    const bytes = encodeEntry(entry.kind, entry.createdAt, entry.ttl, payload, window);
    recordSize(entry, bytes.length - payload.byteLength + plain);
    return bytes;
  }

  /**
   * The entry in `bytes`, or the error that makes them unreadable: an `UnknownSerializerError`
   * for an entry of a serializer this process cannot read (its header is intact), else a
   * foreign value or a serializer failure.
   */
  decode(bytes: Buffer): StoredEntry | { error: Error } {
    try {
      const header = decodeEntry(bytes);
      let value: unknown;
      let plain = header.payload.length;
      if (header.kind === EntryKind.Value) {
        const reader = header.serializer === undefined ? this.legacy : readerFor(header.serializer, this.serializer);
        if (reader === undefined) {
          const error = new UnknownSerializerError(header.serializer!, this.serializer.name);
          error.entry = { createdAt: header.createdAt, ttl: header.ttl };
          return { error };
        }
        const payload = header.compression === undefined ? header.payload : inflate(header.compression, header.payload);
        plain = payload.length;
        value = reader.deserialize(payload);
      }
      const entry: StoredEntry = { kind: header.kind, value, createdAt: header.createdAt, ttl: header.ttl, stale: header.stale, delta: header.delta };
      if (header.revalidate !== undefined) entry.revalidate = header.revalidate;
      if (header.staleIfError !== undefined) entry.staleIfError = header.staleIfError;
      if (header.tags !== undefined) entry.tags = header.tags;
      recordSize(entry, bytes.length - header.payload.length + plain);
      return entry;
    } catch (error) {
      return { error: error as Error };
    }
  }
}

/**
 * The serializer's bytes of a compressed payload: a `SerializationError` naming an algorithm
 * this runtime does not have, a `CorruptEntryError` for bytes that do not decompress or that
 * decompress past `DECOMPRESSED_MAX_BYTES`.
 */
function inflate(algorithm: string, payload: Buffer): Buffer {
  try {
    return decompress(algorithm, payload);
  } catch (error) {
    if (error instanceof SerializationError || error instanceof CorruptEntryError) throw error;
    throw new CorruptEntryError(`the entry's ${algorithm} bytes do not decompress: ${errorMessage(error)}`, { cause: error });
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
