import { InvalidOptionError } from '../shared/errors.js';
import type { StoredEntry } from './types.js';

/** Checks the `jitter` option: a number with 0 ≤ jitter < 1 (`InvalidOptionError` naming `jitter`). */
export function resolveJitter(jitter: unknown, option = 'jitter'): number {
  if (typeof jitter !== 'number' || !Number.isFinite(jitter) || jitter < 0 || jitter >= 1) {
    throw new InvalidOptionError(option, `must be a number with 0 <= jitter < 1 (0.1 spreads each TTL by up to ±10%), got ${String(jitter)}`);
  }
  return jitter;
}

/**
 * Spreads `entry.ttl` by up to `jitter` of it either way (uniformly), in place, before it is
 * stored. A tagged entry is kept within `maxLife` (its tags' stamps live that long), so its
 * spread may only shorten it there.
 */
export function spreadTtl(entry: StoredEntry, jitter: number, maxLife: number): void {
  if (jitter === 0 || !(entry.ttl > 0)) return;
  let ttl = entry.ttl * (1 + jitter * (2 * Math.random() - 1));
  if (entry.tags !== undefined) ttl = Math.min(ttl, maxLife - (entry.stale ?? 0));
  entry.ttl = Math.max(1, Math.round(ttl));
}
