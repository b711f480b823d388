import { LRUCache } from 'lru-cache';
import type { EntryCodec } from './codec.js';
import type { Backend, Commit, Lookup, Outcome, StoredEntry } from './types.js';

/**
 * The embedded default: entries in an lru-cache in this process, values kept as they are
 * (not copied: do not mutate what the cache hands you). Misses are coalesced by the cache's
 * in-process single-flight, so every lookup that finds nothing leads. Values are still run
 * through the codec when stored, so a value that a shared store could not hold fails the
 * same way here (`SerializationError`).
 */
export class MemoryBackend implements Backend {
  readonly distributed = false;
  readonly peekLayer = 'store';
  private readonly lru: LRUCache<string, StoredEntry>;

  constructor(
    maxEntries: number,
    private readonly codec: EntryCodec,
  ) {
    this.lru = new LRUCache<string, StoredEntry>({ max: maxEntries, ttlAutopurge: false });
  }

  available(): boolean {
    return true;
  }

  peek(key: string): StoredEntry | undefined {
    return this.lru.get(key);
  }

  keep(): void {
    /* the store is in process memory already */
  }

  async lookup(key: string, _token: string, _lockTtl: number, skipValue: boolean): Promise<Lookup> {
    const entry = skipValue ? undefined : this.lru.get(key);
    return entry ? { kind: 'hit', entry } : { kind: 'lead' };
  }

  async commit(key: string, _token: string, commit: Commit): Promise<boolean> {
    switch (commit.mode) {
      case 'store':
        this.codec.encode(key, commit.entry);
        if (commit.entry.ttl) this.lru.set(key, commit.entry, { ttl: commit.entry.ttl });
        break;
      case 'share':
        this.codec.encode(key, commit.entry);
        break;
      case 'uncacheable':
        if (commit.marker && commit.marker.ttl) this.lru.set(key, commit.marker, { ttl: commit.marker.ttl });
        break;
      default:
        break;
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

  async set(key: string, entry: StoredEntry): Promise<void> {
    this.codec.encode(key, entry);
    this.lru.set(key, entry, { ttl: entry.ttl });
  }

  async delete(key: string): Promise<boolean> {
    return this.lru.delete(key);
  }

  async close(): Promise<void> {
    this.lru.clear();
  }
}
