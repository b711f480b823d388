import { hostname } from 'node:os';
import { BackendError, DogpileError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { abortSignal, boolean, duration, durationOrZero, nonEmptyString, optionNames, optionsObject, resolveFields, type OptionTable } from '../shared/option-table.js';
import { LOCK_DEFAULTS, type AcquireOptions, type LockOptions } from './types.js';

export interface ResolvedLockOptions {
  ttl: number;
  autoRenew: boolean;
  id: string;
  timeout: number;
  prefix: string;
}

const MAX_NAME_LENGTH = 1024;

let ownerIdOfProcess: string | undefined;

/**
 * `hostname:pid`, made when a lock first needs it, never on import: Deno asks for a permission
 * (`--allow-sys`) to read the host name, and an app that makes no lock must not need it.
 */
function defaultOwnerId(): string {
  return (ownerIdOfProcess ??= `${hostname()}:${process.pid}`);
}

const LOCK_NAME = nonEmptyString({ max: MAX_NAME_LENGTH });
const PREFIX = nonEmptyString({ forbidden: ['{', '}'] });

/** A lock name: a non-empty string of at most 1024 characters. */
export function validateName(name: unknown, option = 'name'): string {
  return LOCK_NAME(name, option);
}

/** A key prefix: a non-empty string without `{` or `}` (they would break the hash tags). */
export function validatePrefix(value: unknown, option = 'prefix'): string {
  return PREFIX(value, option);
}

/** An owner id: a non-empty string without `|` (the separator of the stored lock value). */
const ownerId = nonEmptyString({ forbidden: ['|'] });

/** The options every lock takes, declared once (docs/lock.md shows them); `RedisLock` and `MemoryLock` add their own. */
export const LOCK_TABLE = {
  ttl: { default: LOCK_DEFAULTS.ttl, check: duration, shown: '`10000` ms', doc: 'lifetime without renewal' },
  autoRenew: { default: LOCK_DEFAULTS.autoRenew, check: boolean, shown: '`true`', doc: 'renew every `ttl / 3` while held' },
  // No default here: `defaultOwnerId()` when a lock is made (resolveLockOptions).
  id: { check: ownerId, shown: '`hostname:pid`', doc: 'owner id stored with the lock' },
  timeout: { default: LOCK_DEFAULTS.timeout, check: durationOrZero, shown: '`10000` ms', doc: 'default wait of `acquire()`; 0 tries once' },
  prefix: { default: LOCK_DEFAULTS.prefix, check: validatePrefix, shown: "`'dogpile'`", doc: 'keys live at `<prefix>:lock:{<name>}`' },
} satisfies OptionTable<LockOptions>;

/** The options of `acquire()`, declared once; an omitted `timeout` is the lock's. */
export const ACQUIRE_TABLE = {
  timeout: { check: durationOrZero, doc: "longest wait; 0 tries once (the lock's `timeout` when omitted)" },
  signal: { check: abortSignal, doc: 'aborts the wait' },
} satisfies OptionTable<AcquireOptions>;

/** The fields of `LockOptions`. */
export const LOCK_OPTION_NAMES = optionNames(LOCK_TABLE);
/** The fields of `AcquireOptions`. */
export const ACQUIRE_OPTION_NAMES = optionNames(ACQUIRE_TABLE);

/** Validates a lock's options; a field not in `known` is refused. */
export function resolveLockOptions(options: LockOptions | undefined, known: readonly string[] = LOCK_OPTION_NAMES): ResolvedLockOptions {
  const o = optionsObject(options ?? {});
  checkKnownOptions(o, known);
  const resolved = resolveFields(LOCK_TABLE, o);
  return { ...resolved, id: resolved.id ?? defaultOwnerId() };
}

/**
 * A lock's Redis call as its caller sees it: a failure of the client (a lost connection, a
 * cluster client out of redirections during a failover, an error reply) rejects with a
 * `BackendError` naming the lock, the client's error as its `cause`. The library's own errors
 * pass through.
 */
export function redisCall<T>(name: string, operation: string, call: Promise<T>): Promise<T> {
  return call.catch((err: unknown) => {
    if (err instanceof DogpileError) throw err;
    throw new BackendError(`the lock "${name}": Redis ${operation} failed: ${err instanceof Error ? err.message : String(err)}`, { key: name, cause: err });
  });
}
