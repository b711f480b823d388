import { EventEmitter } from 'node:events';
import { createClientFromUrl } from '../redis/client.js';
import { toMs, type Duration } from '../shared/duration.js';
import { CacheClosedError } from '../shared/errors.js';
import { debug, getOrComputeChannel, traceCall, traceHit } from '../shared/diagnostics.js';
import { abortReason } from '../shared/wait.js';
import { EntryCodec } from '../store/codec.js';
import { EntryKind } from '../store/entry.js';
import { validateKey } from '../store/key.js';
import { L1 } from '../store/l1.js';
import { MemoryBackend } from '../store/memory-backend.js';
import { RedisBackend } from '../store/redis-backend.js';
import type { Backend, StoredEntry } from '../store/types.js';
import { isPlainCall, resolveCallOptions, type CallOptions } from './call-options.js';
import type { CacheEvents } from './events.js';
import { Flights, withSignal } from './flights.js';
import { GuardedBackend } from './guarded-backend.js';
import { FreshnessHints } from './hints.js';
import { isRemoteLoaderError, MissProtocol } from './miss-protocol.js';
import { resolveCacheOptions, type CacheOptions, type ResolvedCacheOptions } from './options.js';
import { TIMED_OUT, type Settled } from './settled.js';
import type { CacheResult, GetOrComputeOptions, Loader } from './types.js';

export type { CacheDecision, CacheResult, CacheStatus, GetOrComputeOptions, Loader, LoaderContext } from './types.js';
export type { CacheEvents } from './events.js';
export { AbandonedLoad } from './settled.js';

/**
 * A cache whose misses are computed once: concurrent callers of one key share one loader
 * run — within the process by single-flight, across processes through Redis (look up or
 * lead in one round trip, store-release-announce in one more, waiters woken by pub/sub).
 */
export class DogpileCache extends EventEmitter<CacheEvents> {
  readonly options: ResolvedCacheOptions;
  private readonly backend: Backend;
  private readonly guarded: GuardedBackend;
  private readonly hints: FreshnessHints;
  private readonly protocol: MissProtocol;
  private readonly flights = new Flights();
  /** Loader runs after a loader failed in another process (`onRemoteError: 'load'`), one per key. */
  private readonly reruns = new Flights();
  private closed = false;

  constructor(options: CacheOptions = {}) {
    super();
    this.options = resolveCacheOptions(options);
    const { redis, l1 } = this.options;
    const codec = new EntryCodec(this.options.serializer);
    if (redis === undefined) {
      this.backend = new MemoryBackend(this.options.maxEntries, codec);
    } else {
      this.backend = new RedisBackend(typeof redis === 'string' ? createClientFromUrl(redis) : redis, {
        prefix: this.options.prefix,
        codec,
        inlineMax: this.options.inlineMax,
        l1: l1 ? new L1(l1.max, l1.ttl) : undefined,
        ownsClient: typeof redis === 'string',
      });
    }
    this.hints = new FreshnessHints(this.backend);
    this.guarded = new GuardedBackend(this.backend, this.options, this, (key) => this.hints.forget(key));
    this.protocol = new MissProtocol(this.guarded, this.hints, this);
  }

  /** True when the cache coordinates through Redis (across processes). */
  get distributed(): boolean {
    return this.backend.distributed;
  }

  /**
   * Returns the cached value of `key`, or runs `loader` once for all concurrent callers and
   * caches its result for `ttl`.
   */
  getOrCompute<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<T> {
    // Fast paths for hits, taken only with plain arguments (a key, a loader, a TTL): a hit in
    // process memory (embedded store or L1) without async machinery, then a plain GET of a
    // value known to be fresh in Redis. Anything else, bad input included, goes through resolve().
    if (!this.closed && isPlainCall(key, loader, ttlOrOptions)) {
      const local = this.backend.peek(key);
      if (local !== undefined && local.kind === EntryKind.Value) {
        if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: this.backend.peekLayer });
        if (getOrComputeChannel.hasSubscribers) traceHit(key, this.backend.peekLayer, { value: local.value, status: 'hit', createdAt: local.createdAt, degraded: false });
        return Promise.resolve(local.value as T);
      }
      // Traced calls that are not answered from process memory go through resolve().
      if (getOrComputeChannel.hasSubscribers) return this.resolve(key, loader, ttlOrOptions).then(valueOf);
      // A value this process saw in Redis and that has not expired: one bounded GET, shared by
      // concurrent readers of the key. A miss, a marker, a corrupt value or a Redis failure goes
      // on to the full protocol.
      if (!this.flights.has(key) && this.hints.believedFresh(key) && this.guarded.usable(key)) {
        return this.flights.sharedRead(key, () => this.guarded.get(key)).then(
          (found) => {
            if (found !== undefined && !('corrupt' in found) && found.kind === EntryKind.Value) {
              if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: 'store' });
              if (this.options.l1) this.hints.remember(key, found);
              return found.value as T;
            }
            return this.resolve(key, loader, ttlOrOptions).then(valueOf);
          },
          () => this.resolve(key, loader, ttlOrOptions).then(valueOf),
        );
      }
    }
    return this.resolve(key, loader, ttlOrOptions).then(valueOf);
  }

  /** `getOrCompute` that also tells how the call was answered (used by the HTTP adapters). */
  resolve<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
    if (!getOrComputeChannel.hasSubscribers) return this.resolveCall(key, loader, ttlOrOptions);
    // Traced on `dogpile-guard:getOrCompute`. resolveCall() looks in process memory first and
    // synchronously, so a hit it answers was read from the layer this peek finds.
    const hitLayer = typeof key === 'string' && key !== '' && this.backend.peek(key)?.kind === EntryKind.Value ? this.backend.peekLayer : undefined;
    return traceCall(key, hitLayer, () => this.resolveCall(key, loader, ttlOrOptions));
  }

  private async resolveCall<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
    const opts = resolveCallOptions(this.options, key, loader, ttlOrOptions);
    this.assertOpen();
    if (opts.signal?.aborted) throw abortReason(opts.signal, key);

    const local = this.backend.peek(key);
    if (local?.kind === EntryKind.Value) {
      if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: this.backend.peekLayer });
      return { value: local.value as T, status: 'hit', createdAt: local.createdAt, degraded: false };
    }

    const existing = this.flights.get<T>(key);
    if (existing) {
      if (this.listenerCount('coalesced') > 0) this.emit('coalesced', { key, remote: false });
      if (debug.enabled) debug('join key=%s: a loader of this process is running', key);
      let settled;
      try {
        settled = await this.flights.join(existing, key, opts);
      } catch (error) {
        return this.afterRemoteError(error, key, loader, opts);
      }
      if (settled === TIMED_OUT) return result(await this.protocol.waitTimedOut(key, loader, opts));
      if (settled.private) return this.pass(key, loader, opts, settled.degraded);
      if (settled.abandoned) return this.resolveCall(key, loader, ttlOrOptions);
      return result(settled, settled.status === 'hit' ? 'hit' : 'coalesced');
    }

    const flight = this.protocol.fly(key, loader, opts);
    this.flights.start(key, flight);
    let settled;
    try {
      settled = await withSignal(flight, opts.signal, key);
    } catch (error) {
      return this.afterRemoteError(error, key, loader, opts);
    }
    if (settled.marker) return this.pass(key, loader, opts, false);
    return result(settled);
  }

  /** The cached value of `key`, or `undefined`. Rejects with `BackendError` if Redis fails. */
  async get<T = unknown>(key: string): Promise<T | undefined> {
    validateKey(key);
    this.assertOpen();
    const local = this.backend.peek(key);
    if (local) return local.kind === EntryKind.Value ? (local.value as T) : undefined;
    let found;
    try {
      found = await this.guarded.get(key);
    } catch (error) {
      if (!this.guarded.keyFault(key, error)) throw error;
      return undefined;
    }
    if (found === undefined) return undefined;
    if ('corrupt' in found) {
      this.emit('corrupt', { key, error: found.corrupt });
      return undefined;
    }
    if (found.kind !== EntryKind.Value) return undefined;
    this.hints.remember(key, found);
    return found.value as T;
  }

  /** Stores `value` under `key` for `ttl`. Rejects with `SerializationError` / `BackendError`. */
  async set<T>(key: string, value: T, ttl: Duration): Promise<void> {
    validateKey(key);
    const ttlMs = toMs(ttl, 'ttl');
    this.assertOpen();
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: Date.now(), ttl: ttlMs };
    await this.guarded.set(key, entry);
    this.hints.remember(key, entry);
  }

  /**
   * Deletes `key`. Other processes' L1 copies (when `l1` is on) may still serve it for up to
   * `l1.ttl`. Rejects with `BackendError` if Redis fails.
   */
  async delete(key: string): Promise<boolean> {
    validateKey(key);
    this.assertOpen();
    this.hints.forget(key);
    return this.guarded.delete(key);
  }

  /**
   * Stops accepting calls and closes what the cache created (a client made from a URL);
   * a client you passed in is left open.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.backend.close();
  }

  /** This caller runs its own loader (a private result or a marker); `degraded` carries over from the flight. */
  private async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<CacheResult<T>> {
    const settled = await this.protocol.pass(key, loader, opts);
    return { value: settled.value, status: 'pass', createdAt: settled.createdAt, degraded: degraded || settled.degraded };
  }

  /**
   * The flight failed. When its loader failed in another process and this caller asked for
   * `onRemoteError: 'load'`, it runs its loader itself, once per key for the callers of this
   * process that do the same; any other error is passed on.
   */
  private async afterRemoteError<T>(error: unknown, key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<CacheResult<T>> {
    if (opts.onRemoteError !== 'load' || !isRemoteLoaderError(error)) throw error;
    const running = this.reruns.get<T>(key);
    if (running) {
      const settled = await withSignal(running, opts.signal, key);
      if (settled.private) return this.pass(key, loader, opts, false);
      return result(settled, 'coalesced');
    }
    const flight = this.protocol.loadAfterRemoteError(key, loader, opts);
    this.reruns.start(key, flight);
    return result(await withSignal(flight, opts.signal, key));
  }

  private assertOpen(): void {
    if (this.closed) throw new CacheClosedError('the cache is closed; create a new one with createCache()');
  }
}

function result<T>(settled: Settled<T>, status = settled.status): CacheResult<T> {
  return { value: settled.value, status, createdAt: settled.createdAt, degraded: settled.degraded };
}

function valueOf<T>(r: CacheResult<T>): T {
  return r.value;
}
