import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../shared/errors.js';

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
}

/** Where the parts of the core report what happened (the cache itself). */
export type CacheEmitter = EventEmitter<CacheEvents>;
