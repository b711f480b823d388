import type { EntryKind } from './entry.js';

/**
 * When a tag was last invalidated (ms since the epoch, 0: never): `hard` by
 * `invalidateTags(tags)`, `stale` by `invalidateTags(tags, { stale: true })`.
 */
export interface TagStamp {
  hard: number;
  stale: number;
}

/** A stored entry, decoded. */
export interface StoredEntry {
  kind: EntryKind;
  value: unknown;
  createdAt: number;
  /** Fresh for this long after `createdAt` (ms). */
  ttl: number;
  /** Kept this long past `ttl`, for stale serving (the longest stale window, ms). @default 0 */
  stale?: number;
  /** How long the loader took (ms), for early refresh and for tags (the run started `delta` before `createdAt`). @default 0 */
  delta?: number;
  /** The entry's own staleWhileRevalidate window (ms), over the call's (an HTTP response's `stale-while-revalidate`). */
  revalidate?: number;
  /** The entry's own staleIfError window (ms), over the call's (an HTTP response's `stale-if-error`). */
  staleIfError?: number;
  /** The tags the entry carries (`invalidateTags`). */
  tags?: readonly string[];
}

/** What a lookup (step 2 of the miss protocol) asks the store. */
export interface LookupRequest {
  readonly key: string;
  /** The caller's lead token: the lock's value if this lookup takes the lead. */
  readonly token: string;
  /** How long a lead taken by this lookup holds the lock (ms). */
  readonly lockTtl: number;
  /**
   * Looks past the stored value: any value (`'any'`), or only one created at or before
   * `createdUpTo` (ms since the epoch, on the store's clock: the value the caller found
   * invalidated). Absent: a stored value is the answer.
   */
  readonly skip?: 'any' | { readonly createdUpTo: number };
  /** Answers any value with a stale window as `stale`, as if past its `ttl`. @default false */
  readonly expired?: boolean;
  /** Tries the lead lock of a `stale` value in the same call. @default true */
  readonly tryLead?: boolean;
}

/** Step 2 of the miss protocol: the value, the lead, or how long the current leader has left. */
export type Lookup =
  | { kind: 'hit'; entry: StoredEntry }
  /**
   * A value past its `ttl`, inside its stale window; `lead`: this caller took the lead lock;
   * else the lock has `remaining` ms (-2: no lock), and `hold` tells a lock kept after a failed
   * refresh (failSafeRetry: no one is loading) from a running leader's.
   */
  | { kind: 'stale'; entry: StoredEntry; lead: boolean; remaining: number; hold: boolean }
  | { kind: 'corrupt'; error: Error }
  | { kind: 'lead' }
  | { kind: 'wait'; remaining: number; /** The lock had no expiry and was given one (reported as corrupt). */ repaired?: Error };

/** What a leader's store-and-release announces to waiters (or `null`: recheck, a message may be lost). */
export type Outcome =
  | { kind: 'value'; entry: StoredEntry; stored: boolean }
  | { kind: 'corrupt'; error: Error }
  /** Stored, too big to inline (`createdAt` of the new entry, when announced). */
  | { kind: 'stored'; createdAt?: number }
  /** The key was deleted at `at` (ms since the epoch, on the server's clock). */
  | { kind: 'deleted'; at: number }
  /** A value shared but not stored, too big for the message: read it once with `getShared`. */
  | { kind: 'shared' }
  | { kind: 'error'; name: string; message: string }
  | { kind: 'uncacheable' }
  | { kind: 'released' };

/**
 * Step 4 of the miss protocol: what the leader hands the store when it lets go of the lead.
 * A value's `sent`, if given, is called once the value is encoded and its commit handed to the
 * store, before the store answers: the leader's own callers need not wait for that answer.
 */
export type Commit =
  /** Store the value for `entry.ttl` and announce it. */
  | { mode: 'store'; entry: StoredEntry; sharedTtl: number; sent?: () => void }
  /** Announce the value without storing it; a value too big to inline is kept `sharedTtl` ms for the waiters to read once. */
  | { mode: 'share'; entry: StoredEntry; sharedTtl: number; sent?: () => void }
  /** Announce "not cacheable"; with a marker, store it for `marker.ttl` (hit-for-miss). */
  | { mode: 'uncacheable'; marker: StoredEntry | undefined }
  /** Announce the loader's error. */
  | { mode: 'error'; name: string; message: string }
  /** Announce nothing but the release (the loader's work was abandoned). */
  | { mode: 'release' }
  /** Announce the loader's error but keep the lead lock for `holdMs` more (no new attempt fleet-wide until then: failSafeRetry). */
  | { mode: 'fail'; name: string; message: string; holdMs: number };

/**
 * Where the invalidation stamps of tags live. A stamp this process holds is kept up to date
 * (every invalidation is announced), so reads check an entry's tags without a round trip.
 */
export interface TagStamps {
  /** The stamp of `tag`, when this process holds it and will hear of its next change; else undefined. */
  known(tag: string): TagStamp | undefined;
  /** The stamps of `tags`, read from the store where not known (and from then on kept up to date). */
  load(tags: readonly string[]): Promise<TagStamp[]>;
  /** Stamps `tags` as invalidated now (on the store's clock), hard or stale, remembered `keepFor` ms, and tells every process. */
  invalidate(tags: readonly string[], stale: boolean, keepFor: number): Promise<void>;
  close(): void;
}

/**
 * The entry store role: entries by key, read and written (encoded and decoded by the store
 * itself), with the copies this process holds in memory.
 */
export interface EntryStore {
  /** Which layer `peek` reads: the store itself (in process) or an L1 in front of a shared store. */
  readonly peekLayer: 'store' | 'l1';
  /**
   * Whether process memory holds entries (the in-process store, or an L1 in front of a shared
   * store). When false, `peek` and `peekStale` find nothing and `keep` keeps nothing, so a
   * caller skips them.
   */
  readonly holdsInMemory: boolean;
  /** Synchronous hit path: an entry held in process memory, or undefined (no promise per hit). */
  peek(key: string): StoredEntry | undefined;
  /**
   * Keeps a value this process learnt of, for at most `left` ms, where `peek` can find it, and
   * for `staleLeft` ms (default `left`) where `peekStale` can (a no-op without an L1).
   */
  keep(key: string, entry: StoredEntry, left: number, staleLeft?: number): void;
  /** An entry held in process memory, fresh or stale (the fallback while the store is unreachable). */
  peekStale(key: string): StoredEntry | undefined;
  /**
   * Drops what process memory holds in front of a shared store — the copy of `key`, or every
   * copy — so neither `peek` nor `peekStale` answers it (a no-op for the in-process store,
   * which is the store itself).
   */
  forget(key?: string): void;
  /**
   * The store's clock (ms since the epoch, fractional): what every entry's `createdAt`, every
   * delete and every tag stamp is measured on. For Redis, the server's clock (read without a
   * round trip), so the processes' own wall clocks do not matter; in process, this process's.
   */
  readonly now: () => number;
  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined>;
  /**
   * `get` of many keys, answered in their order: on Redis one `MGET` (one round trip), on a
   * cluster one GET per key sent together. A key a cluster node answers with an error about
   * that key alone is answered `{ corrupt }`; any other failure rejects the whole read.
   */
  getMany(keys: readonly string[]): Promise<(StoredEntry | { corrupt: Error } | undefined)[]>;
  /**
   * Stores `entry` for `entry.ttl`; rejects with `SerializationError` when its value cannot be
   * encoded. A `write` (the default: the application's own `set`) supersedes every run of the
   * key begun before it: its lead is dropped, so that run's older value is never stored over
   * it. A value a loader computed (`write` false) stores beside running leads, as they do.
   */
  set(key: string, entry: StoredEntry, write?: boolean): Promise<void>;
  delete(key: string): Promise<boolean>;
  /** Whether calls can be attempted right now (e.g. the client is connected). */
  available(): boolean;
  close(): Promise<void>;
}

/**
 * The miss coordinator role (steps 2–5 of the miss protocol): look up or lead, store and
 * release (commit), renew the lead, and hear what leaders announce.
 */
export interface MissCoordinator {
  /** True when other processes share this backend (waiting and locks go through it). */
  readonly distributed: boolean;
  /**
   * Step 2: the value, or the lead, or the leader's remaining lock time (see `LookupRequest`).
   * A value past its `ttl` on the store's clock (or any value with a stale window, when
   * `expired`) is answered as `stale`, and the lead lock is tried in the same call unless
   * `tryLead` is false.
   */
  lookup(request: LookupRequest): Promise<Lookup>;
  /** Takes the key's lead lock if it is free (a background refresh of a value still stored). */
  tryLead(key: string, token: string, lockTtl: number): Promise<boolean>;
  /** Step 4: store (or not), release the lead and tell waiters; false when the lead was lost. Rejects with `SerializationError` before anything is sent when the value cannot be encoded. */
  commit(key: string, token: string, commit: Commit): Promise<boolean>;
  renew(key: string, token: string, lockTtl: number): Promise<boolean>;
  /**
   * True while the key's channel is subscribed and its connection up: an announcement on it
   * reaches this process now (always true in process).
   */
  live(key: string): boolean;
  /**
   * Subscribes to the key's outcomes; resolves once the subscription is live, with the function
   * that stops listening (`atOnce`: the channel is let go now rather than after its linger).
   */
  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<(atOnce?: boolean) => void>;
  /** The value a leader shared (not stored) and announced as too big to inline. */
  getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined>;
}

/**
 * A store of entries (in process, or Redis): both roles, and the stamps of the tags its entries
 * carry. Judged by no stamp itself: the stamp layer (stamped-backend.ts) wraps it.
 */
export interface Store extends EntryStore, MissCoordinator {
  /** The invalidation stamps of tags. */
  readonly tagStamps: TagStamps;
}

/**
 * The invalidation role: the stamps that judge every entry read (its tags', its cache's
 * generations': one rule), written by `invalidateTags` and `clear`, and held in process.
 */
export interface Invalidation {
  /**
   * `entry` as the stamps held in this process make it (stale since an invalidation with
   * `stale: true`), or undefined when one of them was written since it was made or is not
   * held here. No call to the store.
   */
  withKnownStamps(entry: StoredEntry): StoredEntry | undefined;
  /** Stamps `tags` as invalidated now (on the store's clock), hard or stale, kept `keepFor` ms; every process hears of it. */
  invalidateTags(tags: readonly string[], stale: boolean, keepFor: number): Promise<void>;
  /** The stamps of `tags` (held here, else read once and followed from then on), in their order. */
  tagStamps(tags: readonly string[]): Promise<TagStamp[]>;
  /** Stamps the cache's own generation as `invalidateTags` stamps a tag: its entries and its namespaces' become older. */
  clear(stale: boolean, keepFor: number): Promise<void>;
}

/**
 * Where entries live and how a miss is coordinated, as the core sees it: the three roles it
 * calls, each with its contract suite (test/support/backend-contract.ts), kept by a store seen
 * through its entries' stamps (stamped-backend.ts): every entry the first two hand out is
 * judged by the stamps the third writes.
 */
export interface Backend extends EntryStore, MissCoordinator, Invalidation {}
