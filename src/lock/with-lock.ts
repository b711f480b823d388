import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { ACQUIRE_TABLE } from './common.js';
import { fn, optionNames, optionsObject, resolveFields, type Check, type OptionTable } from '../shared/option-table.js';
import { MEMORY_LOCK_OPTION_NAMES, MEMORY_LOCK_TABLE, MemoryLock, type MemoryLockOptions } from './memory-lock.js';
import { ACCEPTED_CLIENTS, isRedisClient, type RedisClient } from '../redis/client.js';
import { REDIS_LOCK_OPTION_NAMES, REDIS_LOCK_TABLE, RedisLock, type RedisLockOptions } from './redis-lock.js';
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

/** A client to lock on, of a kind the library accepts. */
const lockClient: Check<RedisClient> = (value, option) => {
  if (!isRedisClient(value)) throw new InvalidOptionError(option, `expected ${ACCEPTED_CLIENTS}`);
  return value;
};

/** The options `withLock` adds to those of the locks and of `acquire()`, declared once. */
const WITH_LOCK_ONLY_TABLE = {
  redis: { check: lockClient, doc: 'Redis client to lock on; without it the lock is a `MemoryLock`' },
  onReleaseError: { check: fn<(err: unknown) => void>('(err) => void'), doc: 'called when releasing fails' },
};

/** Every option of `withLock`. */
export const WITH_LOCK_TABLE = { ...REDIS_LOCK_TABLE, ...MEMORY_LOCK_TABLE, ...ACQUIRE_TABLE, ...WITH_LOCK_ONLY_TABLE } satisfies OptionTable<WithLockOptions>;

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
  checkKnownOptions(optionsObject(options), optionNames(WITH_LOCK_TABLE));
  const { redis, onReleaseError } = resolveFields(WITH_LOCK_ONLY_TABLE, options);
  let lock: Lock;
  if (typeof nameOrLock === 'string') {
    lock = redis
      ? new RedisLock(redis, nameOrLock, pick(options, REDIS_LOCK_OPTION_NAMES))
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
      if (onReleaseError) onReleaseError(err);
      else process.emitWarning(`dogpile-guard: releasing the lock "${lock.name}" failed; it will expire by its TTL: ${String(err)}`, 'DogpileWarning');
    }
  }
}
