import { nonEmptyString } from './option-table.js';

/* Cache keys as the caller gives them: checked once, where every layer may import the check. */

/** `key` when it is a non-empty string; else an `InvalidOptionError` naming `key`. */
export function validateKey(key: unknown): string {
  return KEY(key, 'key');
}

const KEY = nonEmptyString();
