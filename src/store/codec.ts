import { SerializationError } from '../shared/errors.js';
import { decodeEntry, encodeEntry, EntryKind } from './entry.js';
import { recordSize } from './entry-size.js';
import type { Serializer } from './serializer.js';
import type { StoredEntry } from './types.js';

const EMPTY = Buffer.alloc(0);

/** Stored entries to bytes and back: the entry format (entry.ts) around the serializer's bytes. */
export class EntryCodec {
  constructor(private readonly serializer: Serializer) {}

  /** The bytes of `entry`; throws `SerializationError` (naming `key`) when its value cannot be serialised. */
  encode(key: string, entry: StoredEntry): Buffer {
    if (entry.kind === EntryKind.HitForMiss) return encodeEntry(entry.kind, entry.createdAt, entry.ttl, EMPTY);
    const window = { stale: entry.stale ?? 0, delta: entry.delta ?? 0, revalidate: entry.revalidate, staleIfError: entry.staleIfError, tags: entry.tags };
    let payload: Uint8Array;
    try {
      payload = this.serializer.serialize(entry.value);
    } catch (error) {
      throw new SerializationError(`the value for "${key}" cannot be serialised: ${errorMessage(error)}`, { key, cause: error });
    }
    if (!(payload instanceof Uint8Array)) {
      throw new SerializationError(`the serializer returned ${typeof payload} for "${key}"; serialize() must return a Buffer or Uint8Array`, { key });
    }
    const bytes = encodeEntry(entry.kind, entry.createdAt, entry.ttl, payload, window);
    recordSize(entry, bytes.length);
    return bytes;
  }

  /** The entry in `bytes`, or the error that makes them unreadable (a foreign value, a serializer failure). */
  decode(bytes: Buffer): StoredEntry | { error: Error } {
    try {
      const header = decodeEntry(bytes);
      const value = header.kind === EntryKind.Value ? this.serializer.deserialize(header.payload) : undefined;
      const entry: StoredEntry = { kind: header.kind, value, createdAt: header.createdAt, ttl: header.ttl, stale: header.stale, delta: header.delta };
      if (header.revalidate !== undefined) entry.revalidate = header.revalidate;
      if (header.staleIfError !== undefined) entry.staleIfError = header.staleIfError;
      if (header.tags !== undefined) entry.tags = header.tags;
      recordSize(entry, bytes.length);
      return entry;
    } catch (error) {
      return { error: error as Error };
    }
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
