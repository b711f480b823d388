import { BaseLock, ownerOf } from './base-lock.js';
import type { LockOptions } from './types.js';
import { abortReason, Wakeup } from '../shared/wait.js';

interface Slot {
  value: string | null;
  /** performance.now() at which the holder's TTL runs out (a step of the wall clock does not move it). */
  expiresAt: number;
  waiters: Set<Wakeup>;
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

  /** Frees every lock of this registry and wakes the waiters. */
  resetAll(): number {
    let n = 0;
    for (const slot of this.slots.values()) {
      if (slot.value !== null) n++;
      slot.value = null;
      for (const w of slot.waiters) w.wake();
    }
    return n;
  }
}

const defaultRegistry = new MemoryLockRegistry();

export interface MemoryLockOptions extends LockOptions {
  /** Locks exclude each other only within one registry. @default the process-wide registry */
  registry?: MemoryLockRegistry;
}

/**
 * The in-process twin of `RedisLock`: the same interface, TTL, fencing tokens and
 * auto-renewal, for one process (the embedded default and tests). Waiters are woken in
 * arrival order by the release; an expired holder's lock is taken over at its expiry.
 */
export class MemoryLock extends BaseLock {
  private readonly registry: MemoryLockRegistry;
  private readonly key: string;

  constructor(name: string, options: MemoryLockOptions = {}) {
    super(name, options);
    this.registry = options.registry ?? defaultRegistry;
    this.key = `${this.options.prefix}:lock:{${this.name}}`;
  }

  static reset(name: string, options: { prefix?: string; registry?: MemoryLockRegistry } = {}): boolean {
    const registry = options.registry ?? defaultRegistry;
    const key = `${options.prefix ?? 'dogpile'}:lock:{${name}}`;
    const slot = registry.slot(key);
    const held = slot.value !== null;
    slot.value = null;
    for (const w of slot.waiters) {
      w.wake();
      break;
    }
    registry.tidy(key, slot);
    return held;
  }

  static resetAll(options: { registry?: MemoryLockRegistry } = {}): number {
    return (options.registry ?? defaultRegistry).resetAll();
  }

  private take(value: string): number | false {
    const slot = this.registry.slot(this.key);
    if (slot.value !== null && slot.expiresAt > performance.now()) return false;
    if (slot.fence === 0) slot.fence = this.registry.fences.get(this.key) ?? 0;
    slot.value = value;
    slot.expiresAt = performance.now() + this.options.ttl;
    slot.fence += 1;
    return slot.fence;
  }

  protected async tryOnce(value: string): Promise<number | false> {
    const token = this.take(value);
    if (token === false) return false;
    return token;
  }

  protected async waitFor(value: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    const slot = this.registry.slot(this.key);
    const wakeup = new Wakeup();
    slot.waiters.add(wakeup);
    try {
      for (;;) {
        if (signal?.aborted) throw abortReason(signal, this.name);
        const token = this.take(value);
        if (token !== false) return token;
        const left = deadline - performance.now();
        if (left <= 0) throw this.timeoutError(timeoutMs);
        await wakeup.sleep(Math.min(left, slot.expiresAt - performance.now() + 1), signal, this.name);
      }
    } finally {
      slot.waiters.delete(wakeup);
      this.registry.tidy(this.key, slot);
    }
  }

  protected async extendRaw(value: string, ms: number): Promise<boolean> {
    const slot = this.registry.slot(this.key);
    const held = slot.value === value && slot.expiresAt > performance.now();
    if (held) slot.expiresAt = performance.now() + ms;
    else this.registry.tidy(this.key, slot);
    return held;
  }

  protected async releaseRaw(value: string): Promise<boolean> {
    const slot = this.registry.slot(this.key);
    if (slot.value !== value) {
      this.registry.tidy(this.key, slot);
      return false;
    }
    slot.value = null;
    const next = slot.waiters.values().next();
    if (!next.done) next.value.wake();
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
