import { LRUCache } from 'lru-cache';
import type { Backend, Commit, Lookup, Outcome, StoredEntry } from './types.js';

/**
 * The embedded default: entries in an lru-cache in this process, values kept as they are
 * (not copied: do not mutate what the cache hands you). Misses are coalesced by the cache's
 * in-process single-flight, so every lookup that finds nothing leads.
 */
export class MemoryBackend implements Backend {
  readonly distributed = false;
  private readonly lru: LRUCache<string, StoredEntry>;

  constructor(maxEntries: number) {
    this.lru = new LRUCache<string, StoredEntry>({ max: maxEntries, ttlAutopurge: false });
  }

  available(): boolean {
    return true;
  }

  async lookup(key: string, _token: string, _lockTtl: number, skipValue: boolean): Promise<Lookup> {
    const entry = skipValue ? undefined : this.lru.get(key);
    return entry ? { kind: 'hit', entry } : { kind: 'lead' };
  }

  /** Synchronous hit path for the cache (no promise per hit). */
  peek(key: string): StoredEntry | undefined {
    return this.lru.get(key);
  }

  async commit(key: string, _token: string, commit: Commit): Promise<boolean> {
    if (commit.entry && commit.ttl && (commit.mode === 'store' || (commit.mode === 'uncacheable' && commit.bytes?.length))) {
      this.lru.set(key, commit.entry, { ttl: commit.ttl });
    }
    return true;
  }

  async renew(): Promise<boolean> {
    return true;
  }

  async listen(_key: string, _listener: (outcome: Outcome | null) => void): Promise<() => void> {
    return () => {};
  }

  async get(key: string): Promise<StoredEntry | undefined> {
    return this.lru.get(key);
  }

  async getShared(): Promise<undefined> {
    return undefined;
  }

  async set(key: string, entry: StoredEntry, _bytes: Buffer, ttl: number): Promise<void> {
    this.lru.set(key, entry, { ttl });
  }

  async delete(key: string): Promise<boolean> {
    return this.lru.delete(key);
  }

  async close(): Promise<void> {
    this.lru.clear();
  }
}
