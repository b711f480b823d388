import { LRUCache } from 'lru-cache';
import { coarseMonotonicNow, monotonicNow } from '../shared/clock.js';
import { storedSize } from './entry-size.js';
import type { StoredEntry } from './types.js';

/** How long a key remembers that it was written or deleted elsewhere (longer than any read in flight). */
const FLOOR_MS = 10_000;

interface Kept {
  /** The copy, or undefined once dropped (the key is then remembered for its floor only). */
  entry: StoredEntry | undefined;
  /** Served as a hit until then (monotonic ms); kept after it, until its stale window ends, only as a fallback. */
  freshUntil: number;
  /**
   * Created-at (ms since the epoch) of the newest write or delete heard of for this key: a copy
   * created before it is outdated, so a read that was in flight when the announcement came
   * cannot put it back.
   */
  floor: number;
}

/**
 * A copy in process memory of values read from a shared store: hits skip the round trip. It
 * follows the announcements of the key's channel (see `RedisBackend`): a newer value replaces
 * the copy, a delete or a value too big to travel drops it; a copy is served as a hit for at
 * most `ttl`. An entry with a stale window is kept until that window ends, for `stale()` only:
 * what is served while Redis is unreachable (`staleIfError`). `onDrop` is called when a key
 * leaves (evicted, expired, deleted), so its channel can be let go.
 */
export class L1 {
  private readonly lru: LRUCache<string, Kept>;

  /**
   * `maxSize`: most bytes kept, each key counted as the stored bytes of its copy (as encoded)
   * plus the key's length (a key remembered for its floor only: its length); a copy larger
   * than `maxSize` is not kept. Without it, only `max` (keys) bounds the L1.
   */
  constructor(
    max: number,
    private readonly ttl: number,
    onDrop?: (key: string) => void,
    private readonly maxSize?: number,
  ) {
    this.lru = new LRUCache<string, Kept>({
      max,
      ...(maxSize === undefined ? {} : { maxSize, sizeCalculation: keptSize }),
      dispose: onDrop
        ? (_kept, key, reason) => {
            if (reason !== 'set') onDrop(key);
          }
        : undefined,
    });
  }

  /** The copy of `key` if it is still a hit (its `freshUntil` checked on the coarse clock: never early, late by up to a millisecond). */
  get(key: string): StoredEntry | undefined {
    const kept = this.lru.get(key);
    return kept !== undefined && kept.freshUntil > coarseMonotonicNow() ? kept.entry : undefined;
  }

  /** The copy of `key` kept as a fallback, fresh or not (until its stale window ends). */
  stale(key: string): StoredEntry | undefined {
    return this.lru.get(key)?.entry;
  }

  /** True when `key` has a copy or a floor here. */
  has(key: string): boolean {
    return this.lru.has(key);
  }

  /**
   * Keeps `entry` as a hit for `l1.ttl`, or less when the entry has only `left` ms to live
   * (0: as a fallback only); as a fallback for `staleLeft` ms (its stale window), when that is
   * longer. An entry older than a write or delete heard of for the key is not kept.
   */
  keep(key: string, entry: StoredEntry, left: number, staleLeft = left): void {
    const current = this.lru.peek(key);
    const floor = current?.floor ?? 0;
    if (entry.createdAt < floor) return;
    if (current?.entry !== undefined && current.entry.createdAt > entry.createdAt) return;
    const hitFor = Math.max(0, Math.min(this.ttl, left));
    // The same value, already served as a hit: a copy that may only be a fallback does not demote it.
    if (hitFor === 0 && current?.entry !== undefined && current.entry.createdAt === entry.createdAt && current.freshUntil > monotonicNow()) return;
    if (this.maxSize !== undefined && key.length + storedSize(entry) > this.maxSize) {
      // Too big to keep: the key is remembered for its floor only (its channel still followed).
      this.lru.set(key, { entry: undefined, freshUntil: 0, floor }, { ttl: FLOOR_MS });
      return;
    }
    const lifetime = Math.max(1, hitFor, staleLeft, current ? FLOOR_MS : 0);
    // A fallback only is never a hit, however the coarse clock of `get` lags (0 is before any reading).
    this.lru.set(key, { entry, freshUntil: hitFor > 0 ? monotonicNow() + hitFor : 0, floor }, { ttl: lifetime });
  }

  /**
   * Another process wrote or deleted `key` at `at` (created-at of its value, or the time of the
   * delete): drops the copy if it is older, and remembers `at` for reads still in flight.
   */
  heard(key: string, at: number): void {
    const current = this.lru.peek(key);
    if (current === undefined) {
      this.lru.set(key, { entry: undefined, freshUntil: 0, floor: at }, { ttl: FLOOR_MS });
      return;
    }
    if (at > current.floor) current.floor = at;
    if (current.entry !== undefined && current.entry.createdAt < at) {
      current.entry = undefined;
      current.freshUntil = 0;
    }
  }

  /** Stops serving `key` as a hit; the copy stays as a fallback (`stale()`). */
  untrust(key: string): void {
    const current = this.lru.peek(key);
    if (current) current.freshUntil = 0;
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  clear(): void {
    this.lru.clear();
  }
}

/** What a key takes in an L1 bounded in bytes: its copy's stored bytes and the key's length (at least 1). */
function keptSize(kept: Kept, key: string): number {
  return Math.max(1, key.length + (kept.entry === undefined ? 0 : storedSize(kept.entry)));
}
