import { debug } from '../shared/diagnostics.js';
import type { StoredEntry } from '../store/types.js';
import type { CacheEmitter } from './events.js';
import type { FreshnessHints } from './hints.js';
import type { GuardedBackend } from './guarded-backend.js';
import type { Shared } from './settled.js';

/** What every part of the miss protocol works with: the guarded store, the freshness hints, the cache's events. */
export interface ProtocolParts {
  readonly backend: GuardedBackend;
  readonly hints: FreshnessHints;
  readonly events: CacheEmitter;
}

/** A stored value as the answer of a flight. */
export function answer<T>(entry: StoredEntry, status: 'hit' | 'coalesced'): Shared<T> {
  return { kind: 'shared', value: entry.value as T, status, createdAt: entry.createdAt, degraded: false };
}

/** The stale value as the answer, reported by a `stale` event. */
export function staleAnswer<T>(parts: ProtocolParts, key: string, entry: StoredEntry, reason: 'revalidate' | 'error' | 'timeout', degraded = false): Shared<T> {
  const age = parts.backend.now() - entry.createdAt;
  if (debug.enabled) debug('stale key=%s: a stale value served (%s), %d ms old', key, reason, age);
  if (parts.events.listenerCount('stale') > 0) parts.events.emit('stale', { key, reason, age });
  return { kind: 'shared', value: entry.value as T, status: 'stale', staleReason: reason, createdAt: entry.createdAt, degraded };
}

/** A refresh or a miss failed and the stale value is served instead (`staleIfError`). */
export function failSafe<T>(parts: ProtocolParts, key: string, entry: StoredEntry, error: unknown, degraded: boolean): Shared<T> {
  parts.events.emit('failSafe', { key, error });
  return staleAnswer(parts, key, entry, 'error', degraded);
}

/** With `softTimeout` (ms, 0: none), the stale value answers callers still waiting after it; the work goes on. */
export function softly<R>(parts: ProtocolParts, key: string, work: Promise<R>, entry: StoredEntry, softTimeout: number): Promise<R | Shared<never>> {
  if (softTimeout <= 0) return work;
  return new Promise<R | Shared<never>>((resolve, reject) => {
    const timer = setTimeout(() => resolve(staleAnswer(parts, key, entry, 'timeout')), softTimeout);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
