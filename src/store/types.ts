import type { EntryKind } from './entry.js';

/** A stored entry, decoded. */
export interface StoredEntry {
  kind: EntryKind;
  value: unknown;
  createdAt: number;
  ttl: number;
}

/** Step 2 of the miss protocol: the value, the lead, or how long the current leader has left. */
export type Lookup =
  | { kind: 'hit'; entry: StoredEntry }
  | { kind: 'corrupt'; error: Error }
  | { kind: 'lead' }
  | { kind: 'wait'; remaining: number; /** The lock had no expiry and was given one (reported as corrupt). */ repaired?: Error };

/** What a leader's store-and-release announces to waiters (or `null`: recheck, a message may be lost). */
export type Outcome =
  | { kind: 'value'; entry: StoredEntry; stored: boolean }
  | { kind: 'corrupt'; error: Error }
  | { kind: 'stored' }
  /** A value shared but not stored, too big for the message: read it once with `getShared`. */
  | { kind: 'shared' }
  | { kind: 'error'; name: string; message: string }
  | { kind: 'uncacheable' }
  | { kind: 'released' };

export type CommitMode = 'store' | 'share' | 'uncacheable' | 'error' | 'release';

export interface Commit {
  mode: CommitMode;
  /** For 'store' / 'share': the encoded entry; for 'uncacheable': an optional marker entry; for 'error': the JSON error. */
  bytes?: Buffer;
  /** For 'store' / 'share' / 'uncacheable': the live value and entry metadata (memory backends keep these). */
  entry?: StoredEntry;
  ttl?: number;
  /** For 'share': how long a value too big to inline is kept for the waiters to read. */
  sharedTtl?: number;
}

/** Where entries live and how a miss is coordinated. */
export interface Backend {
  /** True when other processes share this backend (waiting and locks go through it). */
  readonly distributed: boolean;
  lookup(key: string, token: string, lockTtl: number, skipValue: boolean): Promise<Lookup>;
  /** Step 4: store (or not), release the lead and tell waiters; false when the lead was lost. */
  commit(key: string, token: string, commit: Commit): Promise<boolean>;
  renew(key: string, token: string, lockTtl: number): Promise<boolean>;
  /** Subscribes to the key's outcomes; resolves once the subscription is live. */
  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<() => void>;
  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined>;
  /** The value a leader shared (not stored) and announced as too big to inline. */
  getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined>;
  set(key: string, entry: StoredEntry, bytes: Buffer, ttl: number): Promise<void>;
  delete(key: string): Promise<boolean>;
  /** Whether calls can be attempted right now (e.g. the client is connected). */
  available(): boolean;
  close(): Promise<void>;
}
