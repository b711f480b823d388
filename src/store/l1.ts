import { LRUCache } from 'lru-cache';
import { monotonicNow } from '../shared/clock.js';
import type { StoredEntry } from './types.js';

interface Kept {
  entry: StoredEntry;
  /** Served as a hit until then (monotonic ms); kept after it, until its stale window ends, only as a fallback. */
  freshUntil: number;
}

/**
 * A short-lived copy in process memory of values read from a shared store: hits skip the
 * round trip; other processes' writes are seen after at most `ttl`. An entry with a stale
 * window is kept until that window ends, for `stale()` only: what is served while Redis is
 * unreachable (`staleIfError`).
 */
export class L1 {
  private readonly lru: LRUCache<string, Kept>;

  constructor(
    max: number,
    private readonly ttl: number,
  ) {
    this.lru = new LRUCache({ max });
  }

  get(key: string): StoredEntry | undefined {
    const kept = this.lru.get(key);
    return kept !== undefined && kept.freshUntil > monotonicNow() ? kept.entry : undefined;
  }

  /** The copy of `key` kept as a fallback, fresh or not (until its stale window ends). */
  stale(key: string): StoredEntry | undefined {
    return this.lru.get(key)?.entry;
  }

  /**
   * Keeps `entry` as a hit for `l1.ttl`, or less when the entry has only `left` ms to live;
   * as a fallback for `staleLeft` ms (its stale window), when that is longer.
   */
  keep(key: string, entry: StoredEntry, left: number, staleLeft = left): void {
    const hitFor = Math.min(this.ttl, left);
    this.lru.set(key, { entry, freshUntil: monotonicNow() + hitFor }, { ttl: Math.max(1, Math.max(hitFor, staleLeft)) });
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  clear(): void {
    this.lru.clear();
  }
}
