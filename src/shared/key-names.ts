import { InvalidOptionError } from './errors.js';

/* Cache keys as the caller gives them: checked once, where every layer may import the check. */

/** `key` when it is a non-empty string; else an `InvalidOptionError` naming `key`. */
export function validateKey(key: unknown): string {
  if (typeof key !== 'string') throw new InvalidOptionError('key', `expected a non-empty string, got ${key === null ? 'null' : typeof key}`);
  if (key.length === 0) throw new InvalidOptionError('key', 'must not be empty');
  return key;
}
