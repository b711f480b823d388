import { BaseLock, ownerOf } from './base-lock.js';
import type { LockOptions } from './types.js';
import { LOCK_TABLE } from './common.js';
import { asGiven, optionNames, type OptionTable } from '../shared/option-table.js';
import { abortReason, Wakeup } from '../shared/wait.js';

/** A caller waiting in `acquire()`. */
interface Waiter {
  value: string;
  ttl: number;
  wakeup: Wakeup;
  /** Set when a release handed the lock to this waiter: its fencing token. */
  token: number | undefined;
}

interface Slot {
  value: string | null;
  /** performance.now() at which the holder's TTL runs out (a step of the wall clock does not move it). */
  expiresAt: number;
  /** In arrival order. */
  waiters: Set<Waiter>;
  fence: number;
}

/**
 * The locks of one process. `MemoryLock`s that share a registry (by default the process-wide
 * one) exclude each other when they have the same prefix and name.
 */
export class MemoryLockRegistry {
  private readonly slots = new Map<string, Slot>();

  /** @internal */
  slot(key: string): Slot {
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { value: null, expiresAt: 0, waiters: new Set(), fence: 0 };
      this.slots.set(key, slot);
    }
    return slot;
  }

  /** @internal Drops a slot nobody holds or waits for (its fencing counter is kept in `fences`). */
  tidy(key: string, slot: Slot): void {
    if (slot.value === null && slot.waiters.size === 0) {
      this.fences.set(key, slot.fence);
      this.slots.delete(key);
    }
  }

  /** @internal fencing counters of idle names, so tokens stay monotonic. */
  readonly fences = new Map<string, number>();

  /** @internal Gives the lock to `value` for `ttl` ms and draws the next fencing token. */
  take(key: string, slot: Slot, value: string, ttl: number): number {
    if (slot.fence === 0) slot.fence = this.fences.get(key) ?? 0;
    slot.value = value;
    slot.expiresAt = performance.now() + ttl;
    slot.fence += 1;
    return slot.fence;
  }

  /**
   * @internal Frees the lock by handing it to the first waiter, as `RedisLock`'s release does:
   * the lock is that waiter's (with its TTL and a new token) before the waiter runs again, so
   * nobody who was not waiting can take it in between. Without waiters the lock is freed.
   */
  handOff(key: string, slot: Slot): void {
    const next = slot.waiters.values().next();
    if (next.done) {
      slot.value = null;
      return;
    }
    const waiter = next.value;
    slot.waiters.delete(waiter);
    waiter.token = this.take(key, slot, waiter.value, waiter.ttl);
    waiter.wakeup.wake();
  }

  /** Frees every lock of this registry, handing each to its first waiter. */
  resetAll(): number {
    let n = 0;
    for (const [key, slot] of this.slots) {
      if (slot.value !== null) n++;
      this.handOff(key, slot);
    }
    return n;
  }
}

const defaultRegistry = new MemoryLockRegistry();

export interface MemoryLockOptions extends LockOptions {
  /** Locks exclude each other only within one registry. @default the process-wide registry */
  registry?: MemoryLockRegistry;
}

/** Every option of `MemoryLock`, declared once. */
export const MEMORY_LOCK_TABLE = {
  ...LOCK_TABLE,
  registry: { default: defaultRegistry, check: asGiven<MemoryLockRegistry>(), shown: 'the process-wide registry', doc: 'locks exclude each other only within one registry' },
} satisfies OptionTable<MemoryLockOptions>;

/** The fields of `MemoryLockOptions`. */
export const MEMORY_LOCK_OPTION_NAMES: readonly string[] = optionNames(MEMORY_LOCK_TABLE);

/**
 * The in-process twin of `RedisLock`: the same interface, TTL, fencing tokens and
 * auto-renewal, for one process (the embedded default and tests). A release hands the lock
 * to the longest-waiting caller, as `RedisLock`'s does; an expired holder's lock is taken over
 * at its expiry.
 */
export class MemoryLock extends BaseLock {
  private readonly registry: MemoryLockRegistry;
  private readonly key: string;

  constructor(name: string, options: MemoryLockOptions = {}) {
    super(name, options, MEMORY_LOCK_OPTION_NAMES);
    this.registry = options.registry ?? defaultRegistry;
    this.key = `${this.options.prefix}:lock:{${this.name}}`;
  }

  static reset(name: string, options: { prefix?: string; registry?: MemoryLockRegistry } = {}): boolean {
    const registry = options.registry ?? defaultRegistry;
    const key = `${options.prefix ?? 'dogpile'}:lock:{${name}}`;
    const slot = registry.slot(key);
    const held = slot.value !== null;
    registry.handOff(key, slot);
    registry.tidy(key, slot);
    return held;
  }

  static resetAll(options: { registry?: MemoryLockRegistry } = {}): number {
    return (options.registry ?? defaultRegistry).resetAll();
  }

  private take(value: string): number | false {
    const slot = this.registry.slot(this.key);
    if (slot.value !== null && slot.expiresAt > performance.now()) return false;
    return this.registry.take(this.key, slot, value, this.options.ttl);
  }

  /** @internal */
  protected async tryOnce(value: string): Promise<number | false> {
    const token = this.take(value);
    if (token === false) return false;
    return token;
  }

  /** @internal */
  protected async waitFor(value: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    const slot = this.registry.slot(this.key);
    const waiter: Waiter = { value, ttl: this.options.ttl, wakeup: new Wakeup(), token: undefined };
    slot.waiters.add(waiter);
    try {
      for (;;) {
        // Handed over: held already (acquire() releases it if the signal aborted meanwhile).
        if (waiter.token !== undefined) return waiter.token;
        if (signal?.aborted) throw abortReason(signal, this.name);
        const token = this.take(value);
        if (token !== false) return token;
        const left = deadline - performance.now();
        if (left <= 0) throw this.timeoutError(timeoutMs);
        await waiter.wakeup.sleep(Math.min(left, slot.expiresAt - performance.now() + 1), signal, this.name);
      }
    } catch (err) {
      // Given up just as a release handed the lock over: pass it on.
      if (waiter.token !== undefined && slot.value === value) this.registry.handOff(this.key, slot);
      throw err;
    } finally {
      slot.waiters.delete(waiter);
      this.registry.tidy(this.key, slot);
    }
  }

  /** @internal */
  protected async extendRaw(value: string, ms: number): Promise<boolean> {
    const slot = this.registry.slot(this.key);
    const held = slot.value === value && slot.expiresAt > performance.now();
    if (held) slot.expiresAt = performance.now() + ms;
    else this.registry.tidy(this.key, slot);
    return held;
  }

  /** @internal */
  protected async releaseRaw(value: string): Promise<boolean> {
    const slot = this.registry.slot(this.key);
    if (slot.value !== value) {
      this.registry.tidy(this.key, slot);
      return false;
    }
    this.registry.handOff(this.key, slot);
    this.registry.tidy(this.key, slot);
    return true;
  }

  async getOwnerId(): Promise<string | null> {
    const slot = this.registry.slot(this.key);
    const owner = slot.value !== null && slot.expiresAt > performance.now() ? ownerOf(slot.value) : null;
    this.registry.tidy(this.key, slot);
    return owner;
  }
}
