import type { SetOptions } from '../core/types.js';
import { monotonicNow } from '../shared/clock.js';

/** `setComputed` arguments of a stored response: its `set` options, and how long its handler ran before the write (ms). */
export type StoreOptions = readonly [options: SetOptions, computedForMs: number];

/**
 * `cache.set` options for a response written outside the miss protocol, made at the moment of
 * the write: its ttl, its tags, and how long ago its handler started (`startedAt`, on the
 * monotonic clock), so that a response whose handler ran while one of its tags was
 * invalidated counts as older than the invalidation, as a loader's value does.
 */
export function storeOptions(ttl: number, tags: readonly string[] | undefined, startedAt: number): StoreOptions {
  // Stamps and `createdAt` are whole milliseconds, rounded down: one more keeps a handler that
  // started in the invalidation's own millisecond older than it.
  const computed = Math.max(0, Math.ceil(monotonicNow() - startedAt)) + 1;
  return [tags === undefined || tags.length === 0 ? { ttl } : { ttl, tags }, computed];
}
