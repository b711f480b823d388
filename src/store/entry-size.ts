import type { StoredEntry } from './types.js';

/** The stored size (bytes) of entries this process encoded or decoded, for an L1 bounded in bytes. */
const sizes = new WeakMap<StoredEntry, number>();

/** What an entry whose bytes this process never saw is counted as (a copy made from one, e.g. marked stale). */
const UNKNOWN_ENTRY_SIZE = 1024;

export function recordSize(entry: StoredEntry, bytes: number): void {
  sizes.set(entry, bytes);
}

/** The bytes `entry` takes in the store, as encoded (or `UNKNOWN_ENTRY_SIZE`). */
export function storedSize(entry: StoredEntry): number {
  return sizes.get(entry) ?? UNKNOWN_ENTRY_SIZE;
}
