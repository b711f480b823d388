import { monotonicNow } from '../shared/clock.js';
import { LRUCache } from 'lru-cache';
import { KEY_HINTS_MAX_BYTES, keyHintSize } from '../shared/keys.js';
import type { Backend, StoredEntry } from '../store/types.js';
import { isFreshNow } from './freshness.js';

/** How many keys' expiry times a Redis-backed cache remembers to read hits with a plain GET (also bounded in bytes). */
const FRESHNESS_HINTS = 10_000;

/**
 * What this process learnt of stored values: their expiry (where a plain GET will likely
 * hit) and, through the backend's `keep`, the value itself where the backend has an L1.
 */
export class FreshnessHints {
  /** Expiry times (monotonic) of values this process has seen in a shared store. */
  private readonly fresh: LRUCache<string, number> | undefined;

  /** The backend's `holdsInMemory` and clock, read once (the hit path reads them at every call). */
  private readonly inMemory: boolean;
  private readonly now: () => number;

  constructor(private readonly backend: Backend) {
    this.inMemory = backend.holdsInMemory;
    this.now = backend.now;
    if (backend.distributed) {
      this.fresh = new LRUCache<string, number>({ max: FRESHNESS_HINTS, maxSize: KEY_HINTS_MAX_BYTES, sizeCalculation: (_v, k) => keyHintSize(k) });
    }
  }

  /**
   * Keeps what this process learnt of a stored value. The entry's expiry is on the store's
   * clock (createdAt is stored); what it has left is turned into a monotonic deadline here,
   * once, so nothing later can stretch a hint (a GET that finds nothing only
   * costs one round trip anyway).
   */
  remember(key: string, entry: StoredEntry): void {
    const left = Math.min(entry.createdAt + entry.ttl - this.backend.now(), entry.ttl);
    const staleLeft = left + (entry.stale ?? 0);
    if (left <= 0) {
      this.fresh?.delete(key);
      // Past its ttl: kept only as the fallback of staleIfError (where the backend has an L1).
      if (staleLeft > 0 && this.backend.holdsInMemory) this.backend.keep(key, entry, 0, staleLeft);
      return;
    }
    this.fresh?.set(key, monotonicNow() + left);
    if (this.backend.holdsInMemory) this.backend.keep(key, entry, left, staleLeft);
  }

  /**
   * What process memory (the in-process store, or the L1 in front of Redis) holds of `key`
   * and is fresh now: a value or a hit-for-miss marker; else undefined. Never asks Redis.
   */
  freshInMemory(key: string): StoredEntry | undefined {
    if (!this.inMemory) return undefined;
    const local = this.backend.peek(key);
    return local !== undefined && isFreshNow(local, this.now) ? local : undefined;
  }

  /** True when this process saw the value of `key` and it has not expired. */
  believedFresh(key: string): boolean {
    const freshUntil = this.fresh?.get(key);
    return freshUntil !== undefined && freshUntil > monotonicNow();
  }

  forget(key: string): void {
    this.fresh?.delete(key);
  }

  /** Forgets every key (an invalidation whose extent this process cannot tell: tags, clear). */
  clear(): void {
    this.fresh?.clear();
  }
}
