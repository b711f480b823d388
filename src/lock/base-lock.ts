import { EventEmitter } from 'node:events';
import { toMs } from '../shared/duration.js';
import { randomBytes } from 'node:crypto';
import { LockAlreadyHeldError, LockLostError, LockNotHeldError, LockTimeoutError } from '../shared/errors.js';
import { ACQUIRE_OPTION_NAMES, ACQUIRE_TABLE, resolveLockOptions, validateName, type ResolvedLockOptions } from './common.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { optionsObject, resolveFields } from '../shared/option-table.js';
import { Renewal } from './renewal.js';
import { abortReason, bounded } from '../shared/wait.js';
import { lockChannel, traceLock } from '../shared/diagnostics.js';
import type { AcquireOptions, Lock, LockOptions } from './types.js';

type State = 'idle' | 'acquiring' | 'held';

export interface LockEvents {
  /** The lock was lost while held (renewal found it gone, or its TTL ran out). */
  lost: [err: LockLostError];
  acquired: [fencingToken: number];
  released: [];
}

/**
 * The state machine `RedisLock` and `MemoryLock` share: one holder per object, re-acquirable
 * after release or timeout, a fresh `signal` per acquisition, renewal or an expiry timer
 * while held, and `Symbol.asyncDispose`.
 */
export abstract class BaseLock extends EventEmitter<LockEvents> implements Lock {
  readonly name: string;
  /** @internal */
  protected readonly options: ResolvedLockOptions;
  /** `acquire()`'s defaults, made once: the resolved omitted values are kept per defaults object. */
  private readonly acquireDefaults: { timeout: number };
  private state: State = 'idle';
  private value = '';
  private token = 0;
  private controller = new AbortController();
  private renewal: Renewal | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;

  /** @internal `known`: the option names the subclass accepts. */
  constructor(name: string, options: LockOptions | undefined, known: readonly string[]) {
    super();
    this.name = validateName(name);
    this.options = resolveLockOptions(options, known);
    this.acquireDefaults = { timeout: this.options.timeout };
  }

  get isHeld(): boolean {
    return this.state === 'held';
  }

  get fencingToken(): number {
    return this.token;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The owner id this object acquires with. */
  get ownerId(): string {
    return this.options.id;
  }

  /** @internal Attempts once; resolves the fencing token, or false when the lock is taken. */
  protected abstract tryOnce(value: string): Promise<number | false>;
  /** @internal Waits up to `timeoutMs` (> 0) for the lock; resolves the fencing token or throws. */
  protected abstract waitFor(value: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<number>;
  /**
   * @internal Whether `acquire()` tries once before it prepares to wait. A lock whose wake-up channel is
   * already live skips it: its first queued attempt takes the lock just as well when it is free.
   */
  protected tryFirst(): boolean {
    return true;
  }
  /** @internal Extends the hold of `value` to `ms` from now; false when it is no longer held. */
  protected abstract extendRaw(value: string, ms: number): Promise<boolean>;
  /** @internal Releases the hold of `value`; false when it was no longer held. */
  protected abstract releaseRaw(value: string): Promise<boolean>;
  abstract getOwnerId(): Promise<string | null>;

  acquire(options: AcquireOptions = {}): Promise<number> {
    if (!lockChannel.hasSubscribers) return this.acquireLock(options);
    return traceLock(this.name, 'acquire', () => this.acquireLock(options)) as Promise<number>;
  }

  tryAcquire(): Promise<number | false> {
    if (!lockChannel.hasSubscribers) return this.tryAcquireLock();
    return traceLock(this.name, 'tryAcquire', () => this.tryAcquireLock());
  }

  private async acquireLock(options: AcquireOptions): Promise<number> {
    checkKnownOptions(optionsObject(options), ACQUIRE_OPTION_NAMES);
    const { timeout, signal } = resolveFields(ACQUIRE_TABLE, options, { defaults: this.acquireDefaults }) as { timeout: number; signal?: AbortSignal };
    this.beginAcquire();
    try {
      if (signal?.aborted) throw abortReason(signal, this.name);
      const value = newLockValue(this.options.id);
      // The first try is bounded by the wait's timeout too (a Redis that does not answer); one
      // that succeeds after acquire() gave up is released.
      let token: number | false = false;
      if (timeout === 0) token = await this.tryOnce(value);
      else if (this.tryFirst()) {
        const releaseLate = (late: number | false) => {
          if (late !== false) this.releaseRaw(value).catch(() => {});
        };
        token = await bounded(this.tryOnce(value), { ms: timeout, onTimeout: () => this.throwTimeout(timeout), signal, key: this.name, late: releaseLate });
      }
      if (token === false) {
        if (timeout === 0) throw this.timeoutError(0);
        token = await this.waitFor(value, timeout, signal);
      }
      if (signal?.aborted) {
        await this.releaseRaw(value).catch(() => {});
        throw abortReason(signal, this.name);
      }
      this.onAcquired(value, token);
      return token;
    } finally {
      if (this.state === 'acquiring') this.state = 'idle';
    }
  }

  private async tryAcquireLock(): Promise<number | false> {
    this.beginAcquire();
    try {
      const value = newLockValue(this.options.id);
      const token = await this.tryOnce(value);
      if (token !== false) this.onAcquired(value, token);
      return token;
    } finally {
      if (this.state === 'acquiring') this.state = 'idle';
    }
  }

  async extend(ms?: number | string): Promise<void> {
    const duration = ms === undefined ? this.options.ttl : toMs(ms, 'ms');
    if (this.state !== 'held') throw new LockNotHeldError(`the lock "${this.name}" is not held by this object`, { key: this.name });
    const held = await this.extendRaw(this.value, duration);
    if (!held) {
      const err = new LockLostError(`the lock "${this.name}" expired or was taken by another holder`, { key: this.name });
      this.markLost(err);
      throw err;
    }
    this.renewal?.touch();
    if (!this.options.autoRenew) this.armExpiry(duration);
  }

  async release(): Promise<boolean> {
    if (this.state !== 'held') return false;
    const value = this.value;
    this.state = 'idle';
    this.clearExpiry();
    const renewal = this.renewal;
    this.renewal = undefined;
    await renewal?.stop();
    const released = await this.releaseRaw(value);
    this.emit('released');
    return released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /** @internal Throws the `LockTimeoutError` of a wait of `timeout` ms (what a bounded wait settles with when it runs out). */
  protected throwTimeout(timeout: number): never {
    throw this.timeoutError(timeout);
  }

  /** @internal */
  protected timeoutError(timeout: number): LockTimeoutError {
    return new LockTimeoutError(
      timeout === 0
        ? `the lock "${this.name}" is held by someone else (tried once: timeout 0)`
        : `timed out after ${timeout} ms waiting for the lock "${this.name}"`,
      { key: this.name },
    );
  }

  private beginAcquire(): void {
    if (this.state !== 'idle') {
      throw new LockAlreadyHeldError(
        `the lock object for "${this.name}" is already ${this.state === 'held' ? 'held' : 'acquiring'}; release it first or create another RedisLock/MemoryLock`,
        { key: this.name },
      );
    }
    this.state = 'acquiring';
  }

  private onAcquired(value: string, token: number): void {
    this.state = 'held';
    this.value = value;
    this.token = token;
    this.controller = new AbortController();
    if (this.options.autoRenew) {
      this.renewal = new Renewal({
        ttl: this.options.ttl,
        key: this.name,
        extend: () => this.extendRaw(value, this.options.ttl),
        onLost: (err) => this.markLost(err),
      }).start();
    } else {
      this.armExpiry(this.options.ttl);
    }
    this.emit('acquired', token);
  }

  private armExpiry(ms: number): void {
    this.clearExpiry();
    this.expiryTimer = setTimeout(() => {
      this.markLost(new LockLostError(`the lock "${this.name}" expired after its TTL without being extended`, { key: this.name }));
    }, ms);
    this.expiryTimer.unref();
  }

  private clearExpiry(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
  }

  private markLost(err: LockLostError): void {
    if (this.state !== 'held') return;
    this.state = 'idle';
    this.clearExpiry();
    const renewal = this.renewal;
    this.renewal = undefined;
    void renewal?.stop();
    this.controller.abort(err);
    this.emit('lost', err);
  }
}

/** `<random 128-bit token>|<owner id>`: the value a lock key holds. */
function newLockValue(ownerId: string): string {
  return `${randomBytes(16).toString('hex')}|${ownerId}`;
}

export function ownerOf(value: string | null): string | null {
  // "~<waiter>": released by an earlier version and reserved for the waiter it woke; nobody holds it yet.
  if (value === null || value.startsWith('~')) return null;
  const bar = value.indexOf('|');
  return bar === -1 ? value : value.slice(bar + 1);
}
