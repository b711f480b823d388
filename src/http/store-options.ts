import { COMPUTED_FOR } from '../core/call-options.js';
import { monotonicNow } from '../shared/clock.js';

/** `cache.set` options of a stored response; `COMPUTED_FOR`: how long its handler ran before the write. */
export type StoreOptions = { ttl: number; tags?: readonly string[]; [COMPUTED_FOR]: number };

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
  return tags === undefined || tags.length === 0 ? { ttl, [COMPUTED_FOR]: computed } : { ttl, tags, [COMPUTED_FOR]: computed };
}
