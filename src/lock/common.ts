import { hostname } from 'node:os';
import { toMs } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { LOCK_DEFAULTS, type LockOptions } from './types.js';

export interface ResolvedLockOptions {
  ttl: number;
  autoRenew: boolean;
  id: string;
  timeout: number;
  prefix: string;
}

const MAX_NAME_LENGTH = 1024;

function defaultOwnerId(): string {
  return `${hostname()}:${process.pid}`;
}

export function validateName(name: unknown, option = 'name'): string {
  if (typeof name !== 'string') throw new InvalidOptionError(option, `expected a non-empty string, got ${name === null ? 'null' : typeof name}`);
  if (name.length === 0) throw new InvalidOptionError(option, 'must not be empty');
  if (name.length > MAX_NAME_LENGTH) throw new InvalidOptionError(option, `must be at most ${MAX_NAME_LENGTH} characters, got ${name.length}`);
  return name;
}

export function validatePrefix(prefix: unknown, option = 'prefix'): string {
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new InvalidOptionError(option, 'must be a non-empty string without "{" or "}"');
  }
  return prefix;
}

/** The fields of `LockOptions`; `RedisLock` and `MemoryLock` add their own. */
export const LOCK_OPTION_NAMES = ['ttl', 'autoRenew', 'id', 'timeout', 'prefix'] as const;
/** The fields of `AcquireOptions`. */
export const ACQUIRE_OPTION_NAMES = ['timeout', 'signal'] as const;

/** Validates a lock's options; a field not in `known` is refused. */
export function resolveLockOptions(options: LockOptions | undefined, known: readonly string[] = LOCK_OPTION_NAMES): ResolvedLockOptions {
  const o = options ?? {};
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new InvalidOptionError('options', 'expected an object');
  checkKnownOptions(o, known);
  if (o.autoRenew !== undefined && typeof o.autoRenew !== 'boolean') throw new InvalidOptionError('autoRenew', 'must be a boolean');
  if (o.id !== undefined && (typeof o.id !== 'string' || o.id.length === 0 || o.id.includes('|'))) {
    throw new InvalidOptionError('id', 'must be a non-empty string without "|"');
  }
  return {
    ttl: o.ttl === undefined ? LOCK_DEFAULTS.ttl : toMs(o.ttl, 'ttl'),
    autoRenew: o.autoRenew ?? LOCK_DEFAULTS.autoRenew,
    id: o.id ?? defaultOwnerId(),
    timeout: o.timeout === undefined ? LOCK_DEFAULTS.timeout : toMs(o.timeout, 'timeout', { allowZero: true }),
    prefix: o.prefix === undefined ? LOCK_DEFAULTS.prefix : validatePrefix(o.prefix),
  };
}
