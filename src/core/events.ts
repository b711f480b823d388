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

/** A caller waits for another caller's run (`remote`: one in another process): told to `coalesced` listeners and to the call's own `onJoin`. */
export function coalesced(events: CacheEmitter, key: string, remote: boolean, onJoin: (() => void) | undefined): void {
  onJoin?.();
  if (events.listenerCount('coalesced') > 0) events.emit('coalesced', { key, remote });
}

/**
 * Whether `emitter` has a listener of `event`, kept up to date as listeners come and go: hot
 * paths read `listened` instead of counting listeners each time (a count costs as much as half
 * of an L1 hit).
 */
export class ListenerFlag {
  listened = false;

  constructor(
    private readonly emitter: EventEmitter,
    private readonly event: string,
  ) {
    this.watch();
  }

  /** After listeners were removed in bulk: the flag is read again, and the watchers put back if they went too. */
  rewatch(): void {
    this.listened = this.emitter.listenerCount(this.event) > 0;
    if (this.emitter.listenerCount('newListener') === 0 || this.emitter.listenerCount('removeListener') === 0) this.watch();
  }

  private watch(): void {
    this.emitter.off('newListener', this.onNew);
    this.emitter.off('removeListener', this.onRemove);
    this.emitter.on('newListener', this.onNew);
    this.emitter.on('removeListener', this.onRemove);
  }

  private readonly onNew = (event: string | symbol): void => {
    if (event === this.event) this.listened = true;
  };

  private readonly onRemove = (event: string | symbol): void => {
    if (event === this.event) this.listened = this.emitter.listenerCount(this.event) > 0;
  };
}
