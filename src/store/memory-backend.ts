import { LRUCache } from 'lru-cache';
import { processNow } from '../shared/clock.js';
import type { EntryCodec } from './codec.js';
import { MemoryTagStamps } from './memory-tags.js';
import type { Commit, Lookup, LookupRequest, Outcome, Store, StoredEntry } from './types.js';

/**
 * The embedded default: entries in an lru-cache in this process, values kept as they are
 * (not copied: do not mutate what the cache hands you). Misses are coalesced by the cache's
 * in-process single-flight, so every lookup that finds nothing leads. Values are still run
 * through the codec when stored, so a value that a shared store could not hold fails the
 * same way here (`SerializationError`). An entry lives `ttl` plus its stale window; a lead
 * lock per key (in process memory) lets one refresh of a stale value run at a time, as the
 * Redis lock does across processes.
 */
/** How many keys' last `set`/`delete` the store remembers (for leads still running when they were written). */
const WRITES_REMEMBERED = 10_000;

export class MemoryBackend implements Store {
  readonly distributed = false;
  readonly peekLayer = 'store';
  readonly holdsInMemory = true;
  readonly tagStamps = new MemoryTagStamps(processNow);
  private readonly lru: LRUCache<string, StoredEntry>;
  /** When each lead of this store began (by token, on the store's clock): its value is older than a write made after. */
  private readonly leadStarts = new Map<string, number>();
  /** When each key was last written or deleted with `set`/`delete` (the store's clock): a lead begun before does not store. */
  private readonly writes = new LRUCache<string, number>({ max: WRITES_REMEMBERED });
  /** Lead locks of stale values being refreshed: key → holder token and expiry (monotonic ms). */
  private readonly locks = new Map<string, { token: string; until: number; hold?: true }>();

  constructor(
    maxEntries: number,
    private readonly codec: EntryCodec,
  ) {
    this.lru = new LRUCache<string, StoredEntry>({ max: maxEntries, ttlAutopurge: false });
  }

  available(): boolean {
    return true;
  }

  /** The store is in this process: its clock is this process's (monotonic, in ms since the epoch). */
  readonly now: () => number = processNow;

  live(): boolean {
    return true;
  }

  peek(key: string): StoredEntry | undefined {
    return this.lru.get(key);
  }

  keep(): void {
    /* the store is in process memory already */
  }

  peekStale(key: string): StoredEntry | undefined {
    return this.lru.get(key);
  }

  forget(): void {
    // The in-process store is the store: nothing sits in front of it.
  }

  async lookup({ key, token, lockTtl, skip, expired = false, tryLead = true }: LookupRequest): Promise<Lookup> {
    const stored = skip === 'any' ? undefined : this.lru.get(key);
    const entry = skip !== undefined && skip !== 'any' && stored && stored.createdAt <= skip.createdUpTo ? undefined : stored;
    if (!entry) {
      this.startedLead(token);
      return { kind: 'lead' };
    }
    if ((entry.stale ?? 0) > 0 && (expired || processNow() >= entry.createdAt + entry.ttl)) {
      if (tryLead && this.lock(key, token, lockTtl)) {
        this.startedLead(token);
        return { kind: 'stale', entry, lead: true, remaining: 0, hold: false };
      }
      const held = this.locks.get(key);
      return { kind: 'stale', entry, lead: false, remaining: held ? Math.max(0, held.until - performance.now()) : -2, hold: held?.hold === true };
    }
    return { kind: 'hit', entry };
  }

  async tryLead(key: string, token: string, lockTtl: number): Promise<boolean> {
    const led = this.lock(key, token, lockTtl);
    if (led) this.startedLead(token);
    return led;
  }

  async commit(key: string, token: string, commit: Commit): Promise<boolean> {
    const held = this.locks.get(key);
    if (held && held.token !== token && held.until > performance.now()) return false;
    const started = this.leadStarts.get(token);
    if (commit.mode !== 'fail') this.leadStarts.delete(token);
    // Written or deleted since this lead began: its value is older than that write, and not stored.
    const written = this.writes.get(key);
    if (written !== undefined && started !== undefined && written >= started && (commit.mode === 'store' || commit.mode === 'uncacheable')) {
      if (held?.token === token) this.locks.delete(key);
      return false;
    }
    if (commit.mode === 'fail') {
      this.locks.set(key, { token, until: performance.now() + commit.holdMs, hold: true });
      return true;
    }
    if (held?.token === token) this.locks.delete(key);
    switch (commit.mode) {
      case 'store':
        this.codec.encode(key, commit.entry);
        if (commit.entry.ttl) this.lru.set(key, commit.entry, { ttl: commit.entry.ttl + (commit.entry.stale ?? 0) });
        commit.sent?.();
        break;
      case 'share':
        this.codec.encode(key, commit.entry);
        commit.sent?.();
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

  async getMany(keys: readonly string[]): Promise<(StoredEntry | undefined)[]> {
    return keys.map((key) => this.lru.get(key));
  }

  async getShared(): Promise<undefined> {
    return undefined;
  }

  async set(key: string, entry: StoredEntry, write = true): Promise<void> {
    this.codec.encode(key, entry);
    this.lru.set(key, entry, { ttl: entry.ttl + (entry.stale ?? 0) });
    if (write) this.wrote(key);
  }

  async delete(key: string): Promise<boolean> {
    this.wrote(key);
    return this.lru.delete(key);
  }

  /** `key` was written or deleted now: a lead still running lets go of its lock and will not store. */
  private wrote(key: string): void {
    this.locks.delete(key);
    this.writes.set(key, processNow());
  }

  private startedLead(token: string): void {
    if (this.leadStarts.size >= WRITES_REMEMBERED) this.leadStarts.delete(this.leadStarts.keys().next().value!);
    this.leadStarts.set(token, processNow());
  }

  async close(): Promise<void> {
    this.lru.clear();
    this.tagStamps.close();
    this.locks.clear();
    this.leadStarts.clear();
    this.writes.clear();
  }

  /** In process, a lead lock lives until its holder commits (a hung loader is given up by `hardTimeout`). */
  private lock(key: string, token: string, _lockTtl: number): boolean {
    const held = this.locks.get(key);
    if (held && held.until > performance.now()) return false;
    this.locks.set(key, { token, until: Number.POSITIVE_INFINITY });
    return true;
  }
}
