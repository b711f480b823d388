import { monotonicNow } from '../shared/clock.js';
import { debug, publishBackendError } from '../shared/diagnostics.js';
import { BackendError, SerializationError } from '../shared/errors.js';
import { faultOf } from '../store/open-store.js';
import type { Backend, Commit, Lookup, LookupRequest, Outcome, StoredEntry, TagStamp } from '../store/types.js';
import { CircuitBreaker } from './circuit-breaker.js';
import type { CacheEmitter } from './events.js';

interface PendingCall {
  deadline: number;
  key: string | undefined;
  operation: string;
  fail: ((err: unknown) => void) | undefined;
}

export interface GuardOptions {
  commandTimeout: number;
  backendCooldown: number;
}

/**
 * A `Backend` behind its guard: every call is bounded by `commandTimeout`, failures are
 * classified (the server's answer about one key, or the backend being unusable) and reported
 * as `backendError`, and an unusable backend is skipped for `backendCooldown` (a circuit
 * breaker). Calls reject with `BackendError`, except `SerializationError` (the caller's value
 * cannot be encoded; nothing was sent), which passes through.
 */
export class GuardedBackend {
  private readonly breaker: CircuitBreaker;
  private readonly pending = new Set<PendingCall>();
  /** Errors that concern one key (the server refused the command for what that key holds). */
  private readonly keyErrors = new WeakSet<Error>();
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly backend: Backend,
    private readonly options: GuardOptions,
    private readonly events: CacheEmitter,
    /** Called for a failure that concerns only `key` (before it is reported as `corrupt`). */
    private readonly onKeyFault: (key: string) => void,
  ) {
    this.breaker = new CircuitBreaker(options.backendCooldown);
    this.now = backend.now;
  }

  get distributed(): boolean {
    return this.backend.distributed;
  }

  /** While true, the backend is not used (invalidations made during an outage wait to be replayed first: `autoRecovery`). */
  hold: (() => boolean) | undefined;

  /** The backend may be tried now: the breaker is closed, nothing holds it, and the client is not disconnected. */
  usable(key: string): boolean {
    if (this.breaker.isOpen()) return false;
    if (this.hold?.()) return false;
    if (this.backend.available()) return true;
    this.breaker.trip();
    const error = new BackendError('the Redis client is not connected', { key });
    this.events.emit('backendError', { key, operation: 'connect', error });
    publishBackendError(key, 'connect', error);
    if (debug.enabled) debug('degraded key=%s: %s; Redis skipped for %d ms', key, error.message, this.options.backendCooldown);
    return false;
  }

  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    return this.timed(key, 'get', () => this.backend.get(key));
  }

  /** `get` of many keys (of `getMany`), bounded by one deadline and, if it fails, reported once. */
  getMany(keys: readonly string[]): Promise<(StoredEntry | { corrupt: Error } | undefined)[]> {
    return this.timed(undefined, 'getMany', () => this.backend.getMany(keys));
  }

  getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    return this.timed(key, 'get', () => this.backend.getShared(key));
  }

  lookup(request: LookupRequest): Promise<Lookup> {
    return this.timed(request.key, 'lookup', () => this.backend.lookup(request));
  }

  /**
   * True while the key's channel reaches this process (see `Backend.live`) and the backend may
   * be used (breaker closed, nothing held): news of a write would be heard here, and no
   * invalidation made during an outage waits to be replayed. What a stale answer from memory needs.
   */
  live(key: string): boolean {
    return !this.breaker.isOpen() && !this.hold?.() && this.backend.live(key);
  }

  /** An entry held in process memory, fresh or stale (the fallback while the store is unusable); no call to the store. */
  peekStale(key: string): StoredEntry | undefined {
    return this.backend.peekStale(key);
  }

  /** `entry` as the stamps held in this process make it (see `Backend.withKnownStamps`); no call to the store. */
  withKnownTags(entry: StoredEntry): StoredEntry | undefined {
    return this.backend.withKnownStamps(entry);
  }

  /** The store's clock (ms since the epoch): the server's for Redis, never this process's wall clock (the store's own function). */
  readonly now: () => number;

  tryLead(key: string, token: string, lockTtl: number): Promise<boolean> {
    return this.timed(key, 'lead', () => this.backend.tryLead(key, token, lockTtl));
  }

  commit(key: string, token: string, commit: Commit): Promise<boolean> {
    return this.timed(key, 'commit', () => this.backend.commit(key, token, commit));
  }

  renew(key: string, token: string, lockTtl: number): Promise<boolean> {
    return this.timed(key, 'renew', () => this.backend.renew(key, token, lockTtl));
  }

  /**
   * Subscribes `listener` to the key's channel, bounded like every call. A subscription given up
   * on (its caller holds no unlisten) is let go at once should Redis confirm it later: else its
   * listener and channel would stay for the life of the process.
   */
  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<(atOnce?: boolean) => void> {
    const subscribing = this.backend.listen(key, listener);
    return this.timed(key, 'subscribe', () => subscribing).catch((error: unknown) => {
      subscribing.then(
        (unlisten) => unlisten(true),
        () => {},
      );
      throw error;
    });
  }

  set(key: string, entry: StoredEntry, write?: boolean): Promise<void> {
    return this.timed(key, 'set', () => this.backend.set(key, entry, write));
  }

  delete(key: string): Promise<boolean> {
    return this.timed(key, 'delete', () => this.backend.delete(key));
  }

  /**
   * Deletes a chunk of keys (of `deleteMany`): every delete sent at once, the chunk bounded by
   * one deadline and, if it fails, reported once. Resolves with how many of the keys held a value.
   */
  deleteChunk(keys: readonly string[]): Promise<number> {
    return this.timed(undefined, 'deleteMany', async () => (await allOrFault(keys.map((key) => this.backend.delete(key)))).filter(Boolean).length);
  }

  /** Stores a chunk of entries (of `setMany`) as `set` does: every write sent at once, the chunk bounded by one deadline and, if it fails, reported once. */
  setChunk(entries: readonly { key: string; entry: StoredEntry }[]): Promise<void> {
    return this.timed(undefined, 'setMany', async () => {
      await allOrFault(entries.map((e) => this.backend.set(e.key, e.entry)));
    });
  }

  invalidateTags(tags: readonly string[], stale: boolean, keepFor: number): Promise<void> {
    return this.timed(undefined, 'invalidateTags', () => this.backend.invalidateTags(tags, stale, keepFor));
  }

  /** The stamps of `tags`, bounded by `commandTimeout` like every call (none of the store when all are held here). */
  tagStamps(tags: readonly string[]): Promise<TagStamp[]> {
    return this.timed(undefined, 'tagStamps', () => this.backend.tagStamps(tags));
  }

  /** True for a failure that says the backend is unusable (not an answer about one key, not the caller's value). */
  unreachable(error: unknown): boolean {
    return error instanceof BackendError && !this.keyErrors.has(error);
  }

  /** Reports a failure that concerns only `key` (a key fault) as `corrupt`; false for any other failure. */
  keyFault(key: string, error: unknown): boolean {
    if (!(error instanceof Error) || !this.keyErrors.has(error)) return false;
    this.onKeyFault(key);
    this.events.emit('corrupt', { key, error });
    return true;
  }

  /**
   * Bounds one backend call (made by `send`, from here) by `commandTimeout`; failures are reported and trip the breaker.
   * One sweep timer serves every pending call (no timer per command on the hot path), so a
   * call times out between commandTimeout and 1.25 × commandTimeout.
   */
  private timed<R>(key: string | undefined, operation: string, send: () => Promise<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const promise = send();
      const call: PendingCall = { deadline: monotonicNow() + this.options.commandTimeout, key, operation, fail: undefined };
      const settle = (err: unknown) => {
        if (!this.pending.delete(call)) return;
        if (err instanceof SerializationError) {
          // The value cannot be encoded: the caller's error, found before anything was sent.
          reject(err);
          return;
        }
        const error = err instanceof BackendError ? err : new BackendError(`Redis ${operation} failed: ${errorMessage(err)}`, { key, cause: err });
        if (faultOf(err) === 'key') {
          // The server answered, about this key only: the breaker stays closed, no backendError.
          this.keyErrors.add(error);
          reject(error);
          return;
        }
        this.breaker.trip();
        this.events.emit('backendError', { key, operation, error });
        publishBackendError(key, operation, error);
        if (debug.enabled) debug('degraded key=%s: %s; Redis skipped for %d ms', key, error.message, this.options.backendCooldown);
        reject(error);
      };
      call.fail = settle;
      this.pending.add(call);
      this.sweepTimer ??= this.startSweep();
      promise.then((v) => {
        if (this.pending.delete(call)) resolve(v);
      }, settle);
    });
  }

  private startSweep(): NodeJS.Timeout {
    const ms = this.options.commandTimeout;
    const timer = setInterval(() => {
      if (this.pending.size === 0) {
        clearInterval(timer);
        this.sweepTimer = undefined;
        return;
      }
      const now = monotonicNow();
      for (const call of this.pending) {
        if (call.deadline <= now) call.fail?.(new BackendError(`Redis did not answer ${call.operation} within ${ms} ms (commandTimeout)`, { key: call.key }));
      }
    }, Math.max(5, Math.floor(ms / 4)));
    timer.unref();
    return timer;
  }
}

/**
 * The results of `calls` once every one settled; else the failure that says most about the
 * backend: one that is not an answer about a single key if there is one (classified as
 * `timed` classifies any failure), else the first.
 */
async function allOrFault<R>(calls: Promise<R>[]): Promise<R[]> {
  const settled = await Promise.allSettled(calls);
  const failed = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed.length === 0) return settled.map((s) => (s as PromiseFulfilledResult<R>).value);
  throw (failed.find((f) => faultOf(f.reason) !== 'key') ?? failed[0]!).reason;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
