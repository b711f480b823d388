import { EventEmitter } from 'node:events';
import type { Duration } from '../shared/duration.js';
import { CacheClosedError } from '../shared/errors.js';
import { getOrComputeChannel, traceCall, traceHit } from '../shared/diagnostics.js';
import { abortReason } from '../shared/wait.js';
import { EntryKind } from '../store/entry.js';
import { validateKey } from '../shared/keys.js';
import type { Backend } from '../store/types.js';
import { isPlainCall, resolveCallOptions, resolveInvalidateOptions } from './call-options.js';
import { ListenerFlag, type CacheEvents } from './events.js';
import { Flights, withSignal } from './flights.js';
import { GuardedBackend } from './guarded-backend.js';
import { HitReads } from './hit-reads.js';
import { RecoveryQueue, type Invalidation, type RecoveryHost } from './recovery.js';
import { FreshnessHints } from './hints.js';
import { MissProtocol, type Flown } from './miss-protocol.js';
import { registerInternals } from './internal.js';
import { resolveCacheOptions, type CacheOptions, type ResolvedCacheOptions } from './options.js';
import type { Settled } from './settled.js';
import { Callers, result, valueOf } from './callers.js';
import type { CacheResult, ClearOptions, GetOrComputeOptions, InvalidateTagsOptions, Loader, SetOptions } from './types.js';
import { validateTags } from '../shared/tag-names.js';
import { getOrComputeMany, type BatchLoader } from './batch.js';
import { deletion, getMany, readStored, servedUntil, setMany, storeOne, validateKeys, type BulkHost, type SetManyEntry, type SetManyOptions } from './bulk.js';
import { childScope, clearScope, clearStale, rootScope, scopedBackend, validateNamespaceName, type CacheScope } from './namespace.js';

export type { CacheDecision, CacheResult, CacheStatus, ClearOptions, GetOrComputeOptions, InvalidateTagsOptions, SetOptions, StoreDecision, Loader, LoaderContext, StaleReason } from './types.js';
export type { CacheEvents } from './events.js';
export type { SetManyEntry, SetManyOptions } from './bulk.js';
export type { BatchLoader, BatchLoaderContext, BatchResult } from './batch.js';
export { AbandonedLoad } from './settled.js';

/**
 * A cache whose misses are computed once: concurrent callers of one key share one loader
 * run — within the process by single-flight, across processes through Redis (look up or
 * lead in one round trip, store-release-announce in one more, waiters woken by pub/sub).
 */
export class DogpileCache extends EventEmitter<CacheEvents> {
  /** @internal The options as resolved (read by namespaces and the HTTP layer). */
  readonly options: ResolvedCacheOptions;
  private readonly backend: Backend;
  private readonly scope: CacheScope;
  /** Namespaces made by `namespace()`, by name. */
  private readonly children = new Map<string, DogpileCache>();
  private readonly guarded: GuardedBackend;
  private readonly hints: FreshnessHints;
  private readonly protocol: MissProtocol;
  /** The hits answered without the miss protocol (process memory, a plain GET of a value seen fresh). */
  private readonly reads: HitReads;
  /** What the single-key writes, the bulk calls and the hit reads work with. */
  private readonly bulk: BulkHost;
  private readonly flights = new Flights();
  /** Forced refreshes (`forceRefresh`) in flight: joined by forced calls only, so plain callers keep reading what is stored. */
  private readonly forced = new Flights();
  /** Callers that join a flight, and those that end up running their own loader. */
  private readonly callers: Callers;
  private closed = false;
  /** Whether a `hit` listener is attached (read by the hit paths). */
  private readonly hits = new ListenerFlag(this as EventEmitter, 'hit');
  /** The store's clock (the Redis server's, estimated without a round trip): what entries' times are on. */
  private readonly clock: () => number;

  constructor(options?: CacheOptions);
  /** @internal `scope`: how `namespace()` makes a cache inside this one. */
  constructor(options: CacheOptions, scope: CacheScope);
  constructor(options: CacheOptions = {}, scope?: CacheScope) {
    super();
    this.options = scope === undefined ? resolveCacheOptions(options) : scope.options;
    this.scope = scope ?? rootScope(this.options);
    this.backend = scopedBackend(this.scope);
    this.clock = this.backend.now;
    this.hints = new FreshnessHints(this.backend);
    this.guarded = new GuardedBackend(this.backend, this.options, this, (key) => this.hints.forget(key));
    this.protocol = new MissProtocol(this.guarded, this.hints, this);
    this.bulk = {
      backend: this.backend,
      guarded: this.guarded,
      hints: this.hints,
      options: this.options,
      events: this,
      clock: this.clock,
      assertOpen: () => this.assertOpen(),
      wrote: (key) => this.wrote(key),
      beforeWrite: () => this.recovery?.before() ?? Promise.resolve(),
    };
    this.reads = new HitReads(this.bulk, this.flights, this.hits);
    this.callers = new Callers(this.options, this.protocol, this, (key, loader, ttl) => this.resolveCall(key, loader, ttl, false, false));
    registerInternals(this, {
      resolve: (key, loader, ttlOrOptions, inline) => this.resolveTraced(key, loader, ttlOrOptions, inline, false),
      set: (key, value, ttlOrOptions, computedForMs, revalidate) => storeOne(this.bulk, key, value, ttlOrOptions, computedForMs, revalidate),
      servedUntil: (key) => servedUntil(this.bulk, key),
      readIfFresh: (key) => (this.closed ? undefined : this.reads.ifFresh(key)),
      tagStamps: (tags) => {
        this.assertOpen();
        const list = validateTags(tags);
        return list.length === 0 ? Promise.resolve([]) : this.guarded.tagStamps(list);
      },
    });
    if (this.options.autoRecovery && this.backend.distributed) {
      const host: RecoveryHost = { forget: (keys) => this.forgetCopies(keys), unreachable: (error) => this.guarded.unreachable(error) };
      const recovery = new RecoveryQueue(host, this.options.autoRecovery.maxQueue, Math.max(this.options.backendCooldown, 50));
      this.recovery = recovery;
      this.guarded.hold = () => recovery.held;
    }
  }

  /** Invalidations made while Redis was unreachable, replayed when it is back (`autoRecovery`). */
  private readonly recovery: RecoveryQueue | undefined;

  /** Sends an invalidation; with `autoRecovery`, one that finds Redis unreachable is kept and replayed (answered `queued`). */
  private invalidate<R>(invalidation: Invalidation, send: () => Promise<R>, queued: R): Promise<R> {
    return this.recovery ? this.recovery.run(invalidation, send, queued) : send();
  }

  /** Drops what process memory holds of `keys` (all: of this cache and its namespaces). */
  private forgetCopies(keys: readonly string[] | undefined): void {
    for (const key of keys ?? []) {
      this.hints.forget(key);
      this.backend.forget(key);
    }
    if (keys !== undefined) return;
    this.hints.clear();
    this.backend.forget();
    for (const child of this.children.values()) child.forgetCopies(undefined);
  }

  /** Removes listeners as EventEmitter does; the `hit` flag follows, and keeps following new listeners. */
  override removeAllListeners(eventName?: Parameters<EventEmitter<CacheEvents>['removeAllListeners']>[0]): this {
    // EventEmitter tells "all" from an event named undefined by the number of arguments.
    if (eventName === undefined) super.removeAllListeners();
    else super.removeAllListeners(eventName);
    this.hits.rewatch();
    return this;
  }

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
      // (Without an in-process store or L1, nothing to look at.)
      const local = this.backend.holdsInMemory ? this.reads.memory(key) : undefined;
      if (local !== undefined) {
        if (getOrComputeChannel.hasSubscribers) traceHit(key, this.backend.peekLayer, { value: local.value, status: 'hit', createdAt: local.createdAt, degraded: false });
        return Promise.resolve(local.value as T);
      }
      // Traced calls that are not answered from process memory go through resolve().
      if (getOrComputeChannel.hasSubscribers) return this.resolve(key, loader, ttlOrOptions).then(valueOf);
      // A loader of this process is running for the key: join it as a small record (the common
      // case of a stampede: thousands of callers, one answer).
      const flight = this.flights.get(key);
      if (flight !== undefined && typeof ttlOrOptions !== 'object') return this.callers.joinPlain(key, loader, ttlOrOptions, flight);
      // No flight here and no sign of a stored value: resolve() need not look again (a miss).
      if (flight === undefined && !this.hints.believedFresh(key)) return this.resolveTraced(key, loader, ttlOrOptions, false, true).then(valueOf);
      // A value this process saw in Redis and that has not expired: one bounded GET, shared by
      // concurrent readers of the key. A miss, a marker, a corrupt value or a Redis failure goes
      // on to the full protocol.
      if (flight === undefined && this.guarded.usable(key)) {
        return this.reads.read(key).then(
          (found) => (this.reads.stored(key, found) ? (found.value as T) : this.resolve(key, loader, ttlOrOptions).then(valueOf)),
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
    return this.reads.memory(key)?.value as T | undefined;
  }

  /** `getOrCompute` that also tells how the call was answered (used by the HTTP adapters). */
  resolve<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
    return this.resolveTraced(key, loader, ttlOrOptions, false, false);
  }

  /** `resolve`; `inline`: the winner of a stale value's refresh lead runs it (`resolveInline`); `unseen`: see `resolveCall`. */
  private resolveTraced<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>, inline: boolean, unseen: boolean, onJoin?: () => void): Promise<CacheResult<T>> {
    if (!getOrComputeChannel.hasSubscribers) return this.resolveCall(key, loader, ttlOrOptions, inline, unseen, onJoin);
    // Traced on `dogpile-guard:getOrCompute`. resolveCall() looks in process memory first and
    // synchronously, so a hit it answers was read from the layer this peek finds.
    const hitLayer = typeof key === 'string' && key !== '' && this.hints.freshInMemory(key)?.kind === EntryKind.Value ? this.backend.peekLayer : undefined;
    return traceCall(key, hitLayer, () => this.resolveCall(key, loader, ttlOrOptions, inline, unseen, onJoin));
  }

  private async resolveCall<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>, inline: boolean, unseen: boolean, onJoin?: () => void): Promise<CacheResult<T>> {
    const opts = resolveCallOptions(this.options, key, loader, ttlOrOptions, inline);
    opts.onJoin = onJoin;
    this.assertOpen();
    if (opts.signal?.aborted) throw abortReason(opts.signal, key);
    // `unseen`: in this same turn, getOrCompute found no fresh value in process memory, no flight and no freshness hint.
    const local = opts.forceRefresh || unseen ? undefined : this.reads.memory(key);
    if (local !== undefined) {
      this.protocol.refreshes.afterHit(key, local, loader, opts);
      return { value: local.value as T, status: 'hit', createdAt: local.createdAt, degraded: false };
    }

    const flights = opts.forceRefresh ? this.forced : this.flights;
    const existing = unseen && !opts.forceRefresh ? undefined : flights.get<T>(key);
    if (existing) return this.callers.join(flights, existing, key, loader, opts, () => this.resolveCall(key, loader, ttlOrOptions, inline, false, onJoin));

    // Plain callers joined to this flight are answered as soon as another process's value is
    // heard (from the subscriber's listener), not after the hops back to this flight.
    const started: { joined?: Promise<Settled<unknown>> } = {};
    const flight = this.protocol.fly(key, loader, opts, (settled) => {
      if (started.joined !== undefined) this.callers.answerEarly(started.joined, settled);
    }, unseen);
    started.joined = flights.start(key, flight);
    let settled: Flown<T>;
    try {
      settled = await withSignal(flight, opts.signal, key);
      // This caller leads an inline refresh (its flight's other callers took the stale value).
      if (settled.kind === 'shared' && settled.inline) settled = await withSignal(settled.inline, opts.signal, key);
    } catch (error) {
      return this.callers.afterRemoteError(error, key, loader, opts);
    }
    if (settled.kind === 'marker') return this.callers.pass(key, loader, opts, false);
    return result(settled);
  }

  /** The cached value of `key`, or `undefined`. Rejects with `BackendError` if Redis fails. */
  async get<T = unknown>(key: string): Promise<T | undefined> {
    validateKey(key);
    this.assertOpen();
    const local = this.hints.freshInMemory(key);
    if (local !== undefined) return local.kind === EntryKind.Value ? (local.value as T) : undefined;
    return readStored<T>(this.bulk, key);
  }

  /**
   * Stores `value` under `key` for `ttl` (or `{ ttl, tags }`), and announces it: waiters take
   * it, other processes' L1 copies follow. Rejects with `SerializationError` / `BackendError`.
   */
  set<T>(key: string, value: T, ttlOrOptions: Duration | SetOptions): Promise<void> {
    return storeOne(this.bulk, key, value, ttlOrOptions, undefined);
  }

  /**
   * Deletes `key`, and tells every process sharing the Redis: their L1 copies are dropped
   * within one pub/sub delivery. Rejects with `BackendError` if Redis fails.
   */
  async delete(key: string): Promise<boolean> {
    validateKey(key);
    this.assertOpen();
    this.hints.forget(key);
    const deleted = await this.invalidate({ kind: 'delete', keys: [key] }, () => this.guarded.delete(key), false);
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
    await this.invalidate({ kind: 'tags', tags: list, stale }, () => this.guarded.invalidateTags(list, stale, this.options.tagStampTtl), undefined);
  }

  /** Stops accepting calls and closes what the cache created (a client made from a URL); a client you passed in is left open. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Namespaces first (they share this cache's client and generation stamps).
    await Promise.all([...this.children.values()].map((child) => child.close()));
    this.scope.detach?.();
    this.recovery?.close();
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
    await this.invalidate({ kind: 'clear', stale }, () => clearScope(this.backend, stale, this.options.commandTimeout, this), undefined);
  }

  /**
   * Many keys at once, loading the missing ones with one call of `loader(keysToLoad, ctx)`:
   * hits are read together (process memory, then one `MGET` of the keys this process saw fresh);
   * every other key is looked up at once; the keys nobody leads are led by this call and loaded
   * together; keys another caller is loading are waited for, not loaded again; the answer is in
   * the order of `keys`. A key the loader leaves out is answered `undefined` and not stored.
   * `ttlOrOptions` applies to every key, as `getOrCompute`'s.
   */
  getOrComputeMany<T>(keys: readonly string[], loader: BatchLoader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T | undefined>): Promise<(T | undefined)[]> {
    return getOrComputeMany<T>(
      {
        resolve: (key, load, ttl, onJoin) => this.resolveTraced(key, load, ttl, false, false, onJoin).then(valueOf),
        hits: (unique) => (this.closed ? Promise.resolve(new Map()) : this.reads.plain(unique, loader, ttlOrOptions)),
      },
      keys,
      loader,
      ttlOrOptions,
    );
  }

  /** The values of `keys` in their order (`undefined` where there is none), in one round trip. Rejects with `BackendError` if Redis fails. */
  getMany<T = unknown>(keys: readonly string[]): Promise<(T | undefined)[]> {
    return getMany<T>(this.bulk, keys);
  }

  /**
   * Stores every entry (`{ key, value, ttl?, tags? }`; `options` gives the `ttl` and `tags` of
   * all), each announced as `set` does, in chunks of `CHUNK_KEYS`, one round trip each. Every entry is checked before
   * anything is written. Rejects with `InvalidOptionError` / `SerializationError` (nothing
   * written) or `BackendError` (some entries may have been written).
   */
  setMany(entries: readonly SetManyEntry[], options?: SetManyOptions): Promise<void> {
    return setMany(this.bulk, entries, options);
  }

  /**
   * Deletes `keys` as `delete` does, in chunks of `CHUNK_KEYS`, one round trip each; resolves
   * with how many held a value. Every key is checked first: a bad one rejects with
   * `InvalidOptionError` before anything is deleted or queued.
   */
  deleteMany(keys: readonly string[]): Promise<number> {
    let checked: readonly string[];
    try {
      checked = validateKeys(keys);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.invalidate({ kind: 'delete', keys: [...checked] }, deletion(this.bulk, checked), 0);
  }

  /** `key` was written or deleted: callers from now on neither join a run nor take a stale answer older than the write. */
  private wrote(key: string): void {
    this.flights.detach(key);
    this.forced.detach(key);
    this.protocol.refreshes.wrote(key);
  }

  private assertOpen(): void {
    if (this.closed) throw new CacheClosedError('the cache is closed; create a new one with createCache()');
  }
}
