import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { ACQUIRE_OPTION_NAMES } from './common.js';
import { MEMORY_LOCK_OPTION_NAMES, MemoryLock, type MemoryLockOptions } from './memory-lock.js';
import { ACCEPTED_CLIENTS, isRedisClient, type RedisClient } from '../redis/client.js';
import { REDIS_LOCK_OPTION_NAMES, RedisLock, type RedisLockOptions } from './redis-lock.js';
import type { AcquireOptions, Lock } from './types.js';

export interface WithLockContext {
  /** Aborts with `LockLostError` if the lock is lost while `fn` runs. */
  signal: AbortSignal;
  /** The fencing token of this acquisition: pass it to the resource you protect. */
  fencingToken: number;
  lock: Lock;
}

export interface WithLockOptions extends RedisLockOptions, MemoryLockOptions, AcquireOptions {
  /** Redis client to lock on; without it the lock is a `MemoryLock` (this process only). */
  redis?: RedisClient;
  /**
   * Called when releasing fails (e.g. Redis went away); the lock then expires by its TTL.
   * @default emits a process warning
   */
  onReleaseError?: (err: unknown) => void;
}

const WITH_LOCK_OPTION_NAMES: ReadonlySet<string> = new Set([...REDIS_LOCK_OPTION_NAMES, ...MEMORY_LOCK_OPTION_NAMES, ...ACQUIRE_OPTION_NAMES, 'redis', 'onReleaseError']);

/** The fields of `options` the lock it makes takes (the others are `withLock`'s own, or the other kind of lock's). */
function pick<O extends object>(options: O, names: readonly string[]): O {
  const picked: Record<string, unknown> = {};
  for (const name of names) if (name in options) picked[name] = (options as Record<string, unknown>)[name];
  return picked as O;
}

/**
 * Runs `fn` while holding the lock and releases it in `finally`, also when `fn` throws.
 * `nameOrLock` is a lock name (a `RedisLock` when `options.redis` is given, else a
 * `MemoryLock`) or a lock object you created. Renewal is on by default.
 */
export async function withLock<T>(
  nameOrLock: string | Lock,
  fn: (ctx: WithLockContext) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  if (typeof fn !== 'function') throw new InvalidOptionError('fn', `expected a function, got ${typeof fn}`);
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidOptionError('options', 'expected an object');
  checkKnownOptions(options, WITH_LOCK_OPTION_NAMES);
  let lock: Lock;
  if (typeof nameOrLock === 'string') {
    if (options.redis !== undefined && !isRedisClient(options.redis)) {
      throw new InvalidOptionError('redis', `expected ${ACCEPTED_CLIENTS}`);
    }
    lock = options.redis
      ? new RedisLock(options.redis, nameOrLock, pick(options, REDIS_LOCK_OPTION_NAMES))
      : new MemoryLock(nameOrLock, pick(options, MEMORY_LOCK_OPTION_NAMES));
  } else if (nameOrLock instanceof RedisLock || nameOrLock instanceof MemoryLock) {
    lock = nameOrLock;
  } else {
    throw new InvalidOptionError('name', 'expected a lock name (string) or a RedisLock/MemoryLock');
  }
  const fencingToken = await lock.acquire({ timeout: options.timeout, signal: options.signal });
  try {
    return await fn({ signal: lock.signal, fencingToken, lock });
  } finally {
    try {
      await lock.release();
    } catch (err) {
      if (options.onReleaseError) options.onReleaseError(err);
      else process.emitWarning(`dogpile-guard: releasing the lock "${lock.name}" failed; it will expire by its TTL: ${String(err)}`, 'DogpileWarning');
    }
  }
}
