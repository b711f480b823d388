import { nonEmptyString } from './option-table.js';

/*
 * Cache keys as the caller gives them: checked once, where every layer may import the check,
 * and what one costs in a map of per-key hints.
 */

/** `key` when it is a non-empty string; else an `InvalidOptionError` naming `key`. */
export function validateKey(key: unknown): string {
  return KEY(key, 'key');
}

const KEY = nonEmptyString();

/**
 * Bytes a map of per-key hints (freshness hints, the HTTP Vary index) may spend on keys,
 * so that long keys (a 12 KB URL) cannot make it grow beyond this, whatever its entry count.
 */
export const KEY_HINTS_MAX_BYTES = 4 * 1024 * 1024;

/** An upper bound of what a key costs in such a map: two bytes per UTF-16 unit, plus the entry. */
export function keyHintSize(key: string): number {
  return 2 * key.length + 64;
}
