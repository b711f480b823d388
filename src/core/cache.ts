import { EventEmitter } from 'node:events';
import { toMs, type Duration } from '../shared/duration.js';
import { CacheClosedError, RemoteLoaderError } from '../shared/errors.js';
import { debug, getOrComputeChannel, traceCall, traceHit } from '../shared/diagnostics.js';
import { abortReason } from '../shared/wait.js';
import { EntryKind } from '../store/entry.js';
import { validateKey } from '../store/key.js';
import type { ScopedBackend } from '../store/scoped-backend.js';
import type { Backend, StoredEntry } from '../store/types.js';
import { checkSetOptions, checkTaggedLifetime, isPlainCall, resolveCallOptions, resolveInvalidateOptions, type CallOptions } from './call-options.js';
import type { CacheEvents } from './events.js';
import { Flights, withSignal } from './flights.js';
import { GuardedBackend } from './guarded-backend.js';
import { FreshnessHints } from './hints.js';
import { MissProtocol } from './miss-protocol.js';
import { registerInternals } from './internal.js';
import { resolveCacheOptions, type CacheOptions, type ResolvedCacheOptions } from './options.js';
import { isFreshNow, staleWindow } from './freshness.js';
import { TIMED_OUT, type Settled } from './settled.js';
import { Joiners, type Answer } from './joiners.js';
import type { CacheResult, ClearOptions, GetOrComputeOptions, InvalidateTagsOptions, Loader, SetOptions } from './types.js';
import { validateTags } from '../shared/tag-names.js';
import { deleteMany, getMany, readStored, setMany, type BulkHost, type SetManyEntry, type SetManyOptions } from './bulk.js';
import { childScope, clearScope, clearStale, rootScope, scopedBackend, validateNamespaceName, type CacheScope } from './namespace.js';

export type { CacheDecision, CacheResult, CacheStatus, ClearOptions, GetOrComputeOptions, InvalidateTagsOptions, SetOptions, StoreDecision, Loader, LoaderContext, StaleReason } from './types.js';
export type { CacheEvents } from './events.js';
export type { SetManyEntry, SetManyOptions } from './bulk.js';
export { AbandonedLoad } from './settled.js';

/**
 * A cache whose misses are computed once: concurrent callers of one key share one loader
 * run — within the process by single-flight, across processes through Redis (look up or
 * lead in one round trip, store-release-announce in one more, waiters woken by pub/sub).
 */
export class DogpileCache extends EventEmitter<CacheEvents> {
  readonly options: ResolvedCacheOptions;
  private readonly backend: Backend;
  private readonly scoped: ScopedBackend;
  private readonly scope: CacheScope;
  /** Namespaces made by `namespace()`, by name. */
  private readonly children = new Map<string, DogpileCache>();
  private readonly guarded: GuardedBackend;
  private readonly hints: FreshnessHints;
  private readonly protocol: MissProtocol;
  private readonly flights = new Flights();
  /** Loader runs after a loader failed in another process (`onRemoteError: 'load'`), one per key. */
  private readonly reruns = new Flights();
  private closed = false;
  /**
   * Whether a `hit` listener is attached, kept up to date as listeners come and go: the hit
   * paths read it instead of counting listeners at every hit (a count costs as much as half
   * of an L1 hit).
   */
  private hitListened = false;
  /** The store's clock (the Redis server's, estimated without a round trip): what entries' times are on. */
  private readonly clock = (): number => this.backend.now();

  /**
   * `scope` is internal: how `namespace()` makes a cache inside this one.
   */
  constructor(options: CacheOptions = {}, scope?: CacheScope) {
    super();
    this.watchHitListeners();
    this.options = scope === undefined ? resolveCacheOptions(options) : scope.options;
    this.scope = scope ?? rootScope(this.options);
    this.scoped = scopedBackend(this.scope);
    this.backend = this.scoped;
    this.hints = new FreshnessHints(this.backend);
    this.guarded = new GuardedBackend(this.backend, this.options, this, (key) => this.hints.forget(key));
    this.protocol = new MissProtocol(this.guarded, this.hints, this);
    registerInternals(this, {
      resolve: (key, loader, ttlOrOptions, inline) => this.resolveTraced(key, loader, ttlOrOptions, inline),
      set: (key, value, ttlOrOptions, computedForMs) => this.store(key, value, ttlOrOptions, computedForMs),
    });
  }

  /** Removes listeners as EventEmitter does; the `hit` flag follows, and keeps following new listeners. */
  override removeAllListeners(eventName?: Parameters<EventEmitter<CacheEvents>['removeAllListeners']>[0]): this {
    // EventEmitter tells "all" from an event named undefined by the number of arguments.
    if (eventName === undefined) super.removeAllListeners();
    else super.removeAllListeners(eventName);
    this.hitListened = this.listenerCount('hit') > 0;
    // The watchers themselves may have gone (all listeners, or those of the watchers' events).
    if ((this as EventEmitter).listenerCount('newListener') === 0 || (this as EventEmitter).listenerCount('removeListener') === 0) this.watchHitListeners();
    return this;
  }

  private watchHitListeners(): void {
    const emitter = this as EventEmitter;
    emitter.off('newListener', this.onNewListener);
    emitter.off('removeListener', this.onRemoveListener);
    emitter.on('newListener', this.onNewListener);
    emitter.on('removeListener', this.onRemoveListener);
  }

  private readonly onNewListener = (event: string | symbol): void => {
    if (event === 'hit') this.hitListened = true;
  };

  private readonly onRemoveListener = (event: string | symbol): void => {
    if (event === 'hit') this.hitListened = this.listenerCount('hit') > 0;
  };

  /**
   * The cache's clock, in ms since the epoch: the Redis server's (estimated without a round
   * trip) with a Redis, this process's otherwise. What entries' `createdAt` (`resolve()`'s
   * result) is measured on: an age is `cache.now() - createdAt`, whatever this machine's clock says.
   */
  now(): number {
    return this.backend.now();
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
    // With early refresh on, every hit draws, so hits go through resolve().
    if (!this.closed && this.options.freshness.earlyRefreshBeta === 0 && isPlainCall(key, loader, ttlOrOptions)) {
      const local = this.backend.peek(key);
      if (local !== undefined && local.kind === EntryKind.Value && isFreshNow(local, this.clock)) {
        if (this.hitListened) this.emit('hit', { key, layer: this.backend.peekLayer });
        if (getOrComputeChannel.hasSubscribers) traceHit(key, this.backend.peekLayer, { value: local.value, status: 'hit', createdAt: local.createdAt, degraded: false });
        return Promise.resolve(local.value as T);
      }
      // Traced calls that are not answered from process memory go through resolve().
      if (getOrComputeChannel.hasSubscribers) return this.resolve(key, loader, ttlOrOptions).then(valueOf);
      // A loader of this process is running for the key: join it as a small record (the common
      // case of a stampede: thousands of callers, one answer).
      const flight = this.flights.get(key);
      if (flight !== undefined && typeof ttlOrOptions !== 'object') return this.joinPlain(key, loader, ttlOrOptions, flight);
      // A value this process saw in Redis and that has not expired: one bounded GET, shared by
      // concurrent readers of the key. A miss, a marker, a corrupt value or a Redis failure goes
      // on to the full protocol.
      if (!this.flights.has(key) && this.hints.believedFresh(key) && this.guarded.usable(key)) {
        return this.flights.sharedRead(key, () => this.guarded.getUnchecked(key)).then(
          (found) => {
            // An entry with tags is not answered here: the full path checks them.
            if (found !== undefined && !('corrupt' in found) && found.kind === EntryKind.Value && found.tags === undefined && isFreshNow(found, this.clock)) {
              if (this.hitListened) this.emit('hit', { key, layer: 'store' });
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

  /**
   * The value of `key` if process memory holds it fresh (the in-process store, or the L1 in
   * front of Redis), synchronously; else `undefined` (never asks Redis, never runs a loader).
   * For hot paths that cannot afford a promise per read; `getOrCompute` does the rest.
   */
  peek<T = unknown>(key: string): T | undefined {
    validateKey(key);
    if (this.closed) return undefined;
    const local = this.backend.peek(key);
    if (local === undefined || local.kind !== EntryKind.Value || !isFreshNow(local, this.clock)) return undefined;
    if (this.hitListened) this.emit('hit', { key, layer: this.backend.peekLayer });
    return local.value as T;
  }

  /** `getOrCompute` that also tells how the call was answered (used by the HTTP adapters). */
  resolve<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
    return this.resolveTraced(key, loader, ttlOrOptions, false);
  }

  /** `resolve`; `inline`: a caller that wins a stale value's refresh lead runs it itself (see `resolveInline`). */
  private resolveTraced<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>, inline: boolean): Promise<CacheResult<T>> {
    if (!getOrComputeChannel.hasSubscribers) return this.resolveCall(key, loader, ttlOrOptions, inline);
    // Traced on `dogpile-guard:getOrCompute`. resolveCall() looks in process memory first and
    // synchronously, so a hit it answers was read from the layer this peek finds.
    const hitLayer = typeof key === 'string' && key !== '' && this.backend.peek(key)?.kind === EntryKind.Value ? this.backend.peekLayer : undefined;
    return traceCall(key, hitLayer, () => this.resolveCall(key, loader, ttlOrOptions, inline));
  }

  private async resolveCall<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>, inline = false): Promise<CacheResult<T>> {
    const opts = resolveCallOptions(this.options, key, loader, ttlOrOptions, inline);
    this.assertOpen();
    if (opts.signal?.aborted) throw abortReason(opts.signal, key);

    const local = this.backend.peek(key);
    if (local?.kind === EntryKind.Value && isFreshNow(local, this.clock)) {
      if (this.hitListened) this.emit('hit', { key, layer: this.backend.peekLayer });
      this.protocol.afterHit(key, local, loader, opts);
      return { value: local.value as T, status: 'hit', createdAt: local.createdAt, degraded: false };
    }

    const existing = this.flights.get<T>(key);
    if (existing) {
      const stale = this.protocol.staleWhileRefreshing<T>(key, opts);
      if (stale) return result(stale);
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
      if (settled.abandoned) return this.resolveCall(key, loader, ttlOrOptions, inline);
      return result(settled, settled.status === 'hit' ? 'hit' : 'coalesced');
    }

    // Plain callers joined to this flight are answered as soon as another process's value is
    // heard (from the subscriber's listener), not after the hops back to this flight.
    const started: { joined?: Promise<Settled<unknown>> } = {};
    const flight = this.protocol.fly(key, loader, opts, (settled) => {
      if (started.joined !== undefined) this.joiners.answer(started.joined, settled);
    });
    started.joined = this.flights.start(key, flight);
    let settled;
    try {
      settled = await withSignal(flight, opts.signal, key);
      // This caller leads an inline refresh (its flight's other callers took the stale value).
      if (settled.inline) settled = await withSignal(settled.inline, opts.signal, key);
    } catch (error) {
      return this.afterRemoteError(error, key, loader, opts);
    }
    if (settled.marker) return this.pass(key, loader, opts, false);
    return result(settled);
  }

  /**
   * A plain caller (no signal, the cache's waitTimeout) joins this process's flight: answered
   * with the flight's value, or, for the rare endings, as `resolveCall` would answer it.
   */
  private joinPlain<T>(key: string, loader: Loader<T>, ttl: Duration, flight: Promise<Settled<unknown>>): Promise<T> {
    const opts = this.plainOptions(key, loader, ttl);
    const stale = this.protocol.staleWhileRefreshing<T>(key, opts);
    if (stale) return Promise.resolve(stale.value);
    if (this.listenerCount('coalesced') > 0) this.emit('coalesced', { key, remote: false });
    if (debug.enabled) debug('join key=%s: a loader of this process is running', key);
    return this.joiners.join(key, flight, opts.waitTimeout, loader as Loader<unknown>, ttl) as Promise<T>;
  }

  /** Answers a plain caller of a settled flight (see `joinPlain`). */
  private readonly answerJoiner = (key: string, answer: Answer, loader: Loader<unknown>, ttl: Duration, settled: Settled<unknown> | undefined, error: unknown): void => {
    let result: Promise<CacheResult<unknown>>;
    if (settled === undefined) result = this.afterRemoteError(error, key, loader, this.plainOptions(key, loader, ttl));
    else if (settled.private) result = this.pass(key, loader, this.plainOptions(key, loader, ttl), settled.degraded);
    else if (settled.abandoned) result = this.resolveCall(key, loader, ttl);
    else {
      answer(settled.value);
      return;
    }
    // Resolved with a promise: the caller's settles as it does, rejection included.
    answer(result.then(valueOf));
  };

  /** A plain caller's waitTimeout passed before the flight settled. */
  private readonly expireJoiner = (key: string, answer: Answer, loader: Loader<unknown>, ttl: Duration): void => {
    answer(this.protocol.waitTimedOut(key, loader, this.plainOptions(key, loader, ttl)).then(settledValue));
  };

  private readonly joiners = new Joiners<Loader<unknown>, Duration>(this.answerJoiner, this.expireJoiner);

  /** The options of a plain call (a key, a loader, a TTL), shared by calls with the same TTL. */
  private plainOptions<T>(key: string, loader: Loader<T>, ttl: Duration): CallOptions<T> {
    let opts = this.plainCalls.get(ttl);
    if (opts === undefined) {
      opts = resolveCallOptions(this.options, key, loader, ttl) as CallOptions<unknown>;
      if (this.plainCalls.size >= 64) this.plainCalls.clear();
      this.plainCalls.set(ttl, opts);
    }
    return opts as CallOptions<T>;
  }

  private readonly plainCalls = new Map<Duration, CallOptions<unknown>>();

  /** The cached value of `key`, or `undefined`. Rejects with `BackendError` if Redis fails. */
  async get<T = unknown>(key: string): Promise<T | undefined> {
    validateKey(key);
    this.assertOpen();
    const local = this.backend.peek(key);
    if (local && isFreshNow(local, this.clock)) return local.kind === EntryKind.Value ? (local.value as T) : undefined;
    return readStored<T>(this.bulk, key);
  }

  /**
   * Stores `value` under `key` for `ttl` (or `{ ttl, tags }`), and announces it: waiters take
   * it, other processes' L1 copies follow. Rejects with `SerializationError` / `BackendError`.
   */
  set<T>(key: string, value: T, ttlOrOptions: Duration | SetOptions): Promise<void> {
    return this.store(key, value, ttlOrOptions, undefined);
  }

  /** `set`; with `computedFor` (ms), a value computed for that long, stored like a loader's (see `setComputed`). */
  private async store<T>(key: string, value: T, ttlOrOptions: Duration | SetOptions, computedFor: number | undefined): Promise<void> {
    validateKey(key);
    const { ttl, tags } = setOptions(ttlOrOptions);
    const stale = staleWindow(this.options.freshness);
    if (tags) checkTaggedLifetime(ttl, this.options.freshness, this.options.tagStampTtl);
    this.assertOpen();
    // Created at the store's time (Redis stamps it again with its own when it stores it).
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: this.backend.now(), ttl, stale };
    // A value computed by a handler (the HTTP layer says how long it ran) stores like a
    // loader's value; any other set is the application's write, newer than every run begun before.
    if (tags) {
      entry.tags = tags;
      entry.delta = computedFor ?? 0;
    }
    const write = computedFor === undefined;
    await this.guarded.set(key, entry, write);
    if (write) this.wrote(key);
    this.hints.remember(key, entry);
  }

  /**
   * Deletes `key`, and tells every process sharing the Redis: their L1 copies are dropped
   * within one pub/sub delivery. Rejects with `BackendError` if Redis fails.
   */
  async delete(key: string): Promise<boolean> {
    validateKey(key);
    this.assertOpen();
    this.hints.forget(key);
    const deleted = await this.guarded.delete(key);
    this.wrote(key);
    return deleted;
  }

  /**
   * Every entry carrying one of `tags`, in every process sharing the Redis, becomes a miss,
   * or with `{ stale: true }` stale (served within its `staleWhileRevalidate` window while one
   * refresh runs fleet-wide). Costs one small write per tag, whatever the number of entries:
   * reads compare an entry's creation with its tags' invalidation times. Resolves once the
   * invalidation is stored and announced; a value whose loader started before that is older.
   * Rejects with `InvalidOptionError` for bad tags (nothing written), `BackendError` if Redis fails.
   */
  async invalidateTags(tags: readonly string[], options: InvalidateTagsOptions = {}): Promise<void> {
    const list = validateTags(tags);
    const stale = resolveInvalidateOptions(options);
    this.assertOpen();
    if (list.length === 0) return;
    // The stamp is the store's time when it is written (the Redis server's, to the microsecond):
    // a run that began before it counts as older, one that begins after it as newer.
    await this.guarded.invalidateTags(list, stale, this.options.tagStampTtl);
  }

  /**
   * Stops accepting calls and closes what the cache created (a client made from a URL);
   * a client you passed in is left open.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Namespaces first (they share this cache's client and generation stamps).
    await Promise.all([...this.children.values()].map((child) => child.close()));
    this.scope.detach?.();
    this.protocol.close();
    await this.backend.close();
    if (this.scope.detach === undefined) this.scope.stamps.close();
  }

  /**
   * A cache with the same API whose keys, tags and locks live apart under `name` (inside this
   * cache's prefix; namespaces nest). The same object for the same name until it is closed.
   * Rejects a bad name with `InvalidOptionError` naming `name`.
   */
  namespace(name: string): DogpileCache {
    validateNamespaceName(name);
    this.assertOpen();
    let child = this.children.get(name);
    if (child === undefined) {
      child = new DogpileCache({}, childScope(this.scope, name, () => this.children.delete(name)));
      this.children.set(name, child);
    }
    return child;
  }

  /**
   * Drops every entry of this cache and of the namespaces inside it, in every process (their
   * L1 copies included, within one pub/sub delivery), or with `{ stale: true }` makes them
   * stale (served within their `staleWhileRevalidate` window while one refresh runs). One
   * small write whatever the number of entries: a generation stamp checked on read. Rejects
   * with `InvalidOptionError` for bad options (nothing written), `BackendError` if Redis fails.
   */
  async clear(options?: ClearOptions): Promise<void> {
    const stale = clearStale(options);
    this.assertOpen();
    await clearScope(this.scoped, stale, this.options.commandTimeout, this);
  }

  /** The values of `keys` in their order (`undefined` where there is none), in one round trip. Rejects with `BackendError` if Redis fails. */
  getMany<T = unknown>(keys: readonly string[]): Promise<(T | undefined)[]> {
    return getMany<T>(this.bulk, keys);
  }

  /**
   * Stores every entry (`{ key, value, ttl?, tags? }`; `options` gives the `ttl` and `tags` of
   * all), each announced as `set` does, in one round trip. Every entry is checked before
   * anything is written. Rejects with `InvalidOptionError` / `SerializationError` (nothing
   * written) or `BackendError` (some entries may have been written).
   */
  setMany(entries: readonly SetManyEntry[], options?: SetManyOptions): Promise<void> {
    return setMany(this.bulk, entries, options);
  }

  /** Deletes `keys` as `delete` does, in one round trip; resolves with how many held a value. */
  deleteMany(keys: readonly string[]): Promise<number> {
    return deleteMany(this.bulk, keys);
  }

  /** `key` was written or deleted: callers from now on neither join a run nor take a stale answer older than the write. */
  private wrote(key: string): void {
    this.flights.detach(key);
    this.protocol.wrote(key);
  }

  private get bulk(): BulkHost {
    this.bulkHost ??= {
      backend: this.backend,
      guarded: this.guarded,
      hints: this.hints,
      options: this.options,
      events: this,
      clock: this.clock,
      assertOpen: () => this.assertOpen(),
      wrote: (key) => this.wrote(key),
    };
    return this.bulkHost;
  }

  private bulkHost: BulkHost | undefined;

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
    if (opts.onRemoteError !== 'load' || !(error instanceof RemoteLoaderError)) throw error;
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

/** `set()`'s third argument: a TTL, or `{ ttl, tags }`. */
function setOptions(ttlOrOptions: Duration | SetOptions): { ttl: number; tags: readonly string[] | undefined } {
  if (ttlOrOptions !== null && typeof ttlOrOptions === 'object') {
    checkSetOptions(ttlOrOptions);
    const tags = ttlOrOptions.tags === undefined ? undefined : validateTags(ttlOrOptions.tags);
    return { ttl: toMs(ttlOrOptions.ttl, 'ttl'), tags: tags && tags.length > 0 ? tags : undefined };
  }
  return { ttl: toMs(ttlOrOptions, 'ttl'), tags: undefined };
}

function result<T>(settled: Settled<T>, status = settled.status): CacheResult<T> {
  if (settled.status === 'stale') return { value: settled.value, status: 'stale', staleReason: settled.staleReason, createdAt: settled.createdAt, degraded: settled.degraded };
  return { value: settled.value, status, createdAt: settled.createdAt, degraded: settled.degraded };
}

function valueOf<T>(r: CacheResult<T>): T {
  return r.value;
}

function settledValue<T>(s: Settled<T>): T {
  return s.value;
}
