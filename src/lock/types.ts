import type { EventEmitter } from 'node:events';
import type { Duration } from '../shared/duration.js';

export interface LockOptions {
  /**
   * How long the lock lives without renewal. With `autoRenew` it is renewed every ttl / 3,
   * so a short TTL is safe for long work and a crashed holder's lock frees up quickly.
   * @default 10_000 (ms)
   */
  ttl?: Duration;
  /**
   * Renew the lock on an unref'd timer while it is held. When a renewal finds the lock gone
   * (or cannot reach Redis for a whole TTL), `signal` aborts with `LockLostError` and `lost`
   * is emitted. Without it, `signal` aborts when the TTL runs out.
   * @default true
   */
  autoRenew?: boolean;
  /**
   * Who holds the lock, readable by anyone through `getOwnerId()`.
   * @default `${hostname}:${pid}`
   */
  id?: string;
  /**
   * How long `acquire()` waits when no `timeout` is given; 0 means try once.
   * @default 10_000 (ms)
   */
  timeout?: Duration;
  /**
   * Key namespace: the lock lives at `<prefix>:lock:{<name>}`.
   * @default 'dogpile'
   */
  prefix?: string;
}

export interface AcquireOptions {
  /** Longest wait in ms (or a duration string); 0 tries once. Defaults to the lock's `timeout`. */
  timeout?: Duration;
  /** Aborts the wait; `acquire()` then rejects with the signal's reason (or `AbortedError`). */
  signal?: AbortSignal;
}

/** The interface `RedisLock` and `MemoryLock` share. */
export interface Lock extends EventEmitter {
  readonly name: string;
  /** True while this object holds the lock (as far as it knows). */
  readonly isHeld: boolean;
  /** Fencing token of the current (or last) acquisition; 0 before the first one. */
  readonly fencingToken: number;
  /** Aborts with `LockLostError` when the lock is lost while held. */
  readonly signal: AbortSignal;
  /** Waits for the lock; resolves with the fencing token. Rejects with `LockTimeoutError`. */
  acquire(options?: AcquireOptions): Promise<number>;
  /** Takes the lock if it is free right now: the fencing token, or `false`. Never waits. */
  tryAcquire(): Promise<number | false>;
  /** Resets the lock's expiry to `ms` from now. Rejects with `LockLostError` when it is no longer held. */
  extend(ms?: Duration): Promise<void>;
  /** Releases the lock: true when it was released, false when it was no longer held by this object. */
  release(): Promise<boolean>;
  /** The owner id of whoever holds the lock now, or null when it is free. */
  getOwnerId(): Promise<string | null>;
  [Symbol.asyncDispose](): Promise<void>;
}

export const LOCK_DEFAULTS = {
  ttl: 10_000,
  autoRenew: true,
  timeout: 10_000,
  prefix: 'dogpile',
} as const;
