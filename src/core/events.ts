import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../shared/errors.js';
import type { StaleReason } from './types.js';

/** The events a `DogpileCache` emits. */
export interface CacheEvents {
  hit: [info: { key: string; layer: 'l1' | 'store' }];
  miss: [info: { key: string }];
  coalesced: [info: { key: string; remote: boolean }];
  loaderError: [info: { key: string; error: unknown }];
  backendError: [info: { key: string | undefined; operation: string; error: Error }];
  corrupt: [info: { key: string; error: Error }];
  lockLost: [info: { key: string; error: LockLostError }];
  waitTimeout: [info: { key: string; waited: number }];
  /** A value past its `ttl` was served; `age`: ms since it was computed. */
  stale: [info: { key: string; reason: StaleReason; age: number }];
  /**
   * A refresh of a value that is still stored (stale, or early): `start` when its loader starts,
   * `end` with its duration (ms) and outcome. Every attempt is counted here.
   */
  refresh: [info: { key: string; phase: 'start' } | { key: string; phase: 'end'; duration: number; outcome: 'stored' | 'error' | 'timeout' | 'lost' }];
  /** A refresh or a miss failed and a stale value was served instead of `error`. */
  failSafe: [info: { key: string; error: unknown }];
}

/** Where the parts of the core report what happened (the cache itself). */
export type CacheEmitter = EventEmitter<CacheEvents>;
