import { LRUCache } from 'lru-cache';
import type { StoredEntry } from './types.js';

/**
 * A short-lived copy in process memory of values read from a shared store: hits skip the
 * round trip; other processes' writes are seen after at most `ttl`.
 */
export class L1 {
  private readonly lru: LRUCache<string, StoredEntry>;

  constructor(
    max: number,
    private readonly ttl: number,
  ) {
    this.lru = new LRUCache({ max });
  }

  get(key: string): StoredEntry | undefined {
    return this.lru.get(key);
  }

  /** Keeps `entry` for `l1.ttl`, or less when the entry has only `left` ms to live. */
  keep(key: string, entry: StoredEntry, left: number): void {
    this.lru.set(key, entry, { ttl: Math.min(this.ttl, left) });
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  clear(): void {
    this.lru.clear();
  }
}
