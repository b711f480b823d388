import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { isDuration, toMs, type Duration } from '../shared/duration.js';
import { EntryCodec } from '../store/codec.js';
import { EntryKind } from '../store/entry.js';
import { L1 } from '../store/l1.js';
import {
  BackendError,
  CacheClosedError,
  InvalidOptionError,
  LoaderError,
  LockLostError,
  SerializationError,
  WaitTimeoutError,
} from '../shared/errors.js';
import { KEY_HINTS_MAX_BYTES, keyHintSize } from '../shared/key-hints.js';
import { validateKey } from '../store/key.js';
import { resolveCacheOptions, type CacheOptions, type ResolvedCacheOptions } from './options.js';
import { Renewal } from '../lock/renewal.js';
import { abortReason, Wakeup } from '../shared/wait.js';
import { MemoryBackend } from '../store/memory-backend.js';
import { RedisBackend } from '../store/redis-backend.js';
import { isKeyError } from '../redis/errors.js';
import type { Backend, Commit, Outcome, StoredEntry } from '../store/types.js';
import { createClientFromUrl } from '../redis/client.js';

export interface LoaderContext {
  /** The cache key being computed. */
  key: string;
  /** Aborts with `LockLostError` if this caller's lead is lost (another process took over). */
  signal: AbortSignal;
}

export type Loader<T> = (ctx: LoaderContext) => T | Promise<T>;

/**
 * What happens to a loader's result:
 * - `'store'`: cached for `ttl` and handed to every waiter;
 * - `'share'`: handed to every current waiter but not cached (the default for `undefined`);
 * - `'private'`: returned only to the caller whose loader produced it; waiters run their own
 *   loader, and with `hitForMissTtl` the next callers skip waiting for a while.
 */
export type CacheDecision = 'store' | 'share' | 'private';

export interface GetOrComputeOptions<T = unknown> {
  /** How long the value stays cached: ms or a string like `'30s'`, `'5m'`. */
  ttl: Duration;
  /** Overrides the cache's `lockTtl` for this call. */
  lockTtl?: Duration;
  /** Overrides the cache's `waitTimeout` for this call. */
  waitTimeout?: Duration;
  /** Overrides the cache's `onWaitTimeout` for this call. */
  onWaitTimeout?: 'throw' | 'load';
  /** Stops this caller's wait (not the shared loader, which others may be waiting for). */
  signal?: AbortSignal;
  /** Decides what happens to the result. @default undefined → 'share', anything else → 'store' */
  cacheable?: (value: T) => CacheDecision;
  /** Overrides the cache's `hitForMissTtl` for a `'private'` result of this call. */
  hitForMissTtl?: Duration;
}

/** How a call was answered. */
export type CacheStatus = 'hit' | 'miss' | 'coalesced' | 'pass';

export interface CacheResult<T> {
  value: T;
  /**
   * `hit`: from the cache; `miss`: this caller ran the loader as the leader; `coalesced`:
   * another caller's loader run (in this process or another); `pass`: this caller ran its own
   * loader without coordination (a private result, a hit-for-miss marker, a wait timeout with
   * `onWaitTimeout: 'load'`).
   */
  status: CacheStatus;
  /** When the value was computed (ms since the epoch). */
  createdAt: number;
  /** True when Redis could not be used for this call. */
  degraded: boolean;
}

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

interface PendingCall {
  deadline: number;
  key: string | undefined;
  operation: string;
  fail: ((err: unknown) => void) | undefined;
}

interface Settled<T> {
  value: T;
  status: CacheStatus;
  createdAt: number;
  degraded: boolean;
  private: boolean;
  /** A hit-for-miss marker or a "not cacheable" announcement: every caller runs its own loader. */
  marker?: true;
  /** The leader's loader gave up (`AbandonedLoad`): its callers look again and one of them leads. */
  abandoned?: true;
}

/** What a flight settles with when its callers should each run their own loader, at once. */
const MARKER: Settled<undefined> = { value: undefined, status: 'pass', createdAt: 0, degraded: false, private: true, marker: true };

interface CallOptions<T> {
  ttl: number;
  lockTtl: number;
  waitTimeout: number;
  onWaitTimeout: 'throw' | 'load';
  signal: AbortSignal | undefined;
  cacheable: ((value: T) => CacheDecision) | undefined;
  hitForMissTtl: number;
}

const RETRY = Symbol('retry');
/** Errors from timed() that concern one key (the server refused the command for what that key holds). */
const keyErrors = new WeakSet<Error>();
const TIMED_OUT = Symbol('timed out');

/**
 * Thrown by a loader that has no result and no error to share, because the work it stood for
 * was cut short (the HTTP adapters: the handler's response could not be captured). The lead is
 * handed back without an announcement or a hit-for-miss marker, and the callers waiting for it
 * look up again, so exactly one of them leads next. The caller whose loader threw gets it back.
 * Internal to the library.
 */
export class AbandonedLoad extends Error {
  override readonly name = 'AbandonedLoad';
}

/** What callers joining a flight see when its loader was abandoned. */
const ABANDONED: Settled<undefined> = { value: undefined, status: 'pass', createdAt: 0, degraded: false, private: false, abandoned: true };

function rejoinIfAbandoned(error: unknown): Settled<undefined> {
  if (error instanceof AbandonedLoad) return ABANDONED;
  throw error;
}

/** How many keys' expiry times a Redis-backed cache remembers to read hits with a plain GET (also bounded in bytes). */
const FRESHNESS_HINTS = 10_000;
const PROCESS_TOKEN = randomBytes(8).toString('hex');

/**
 * A cache whose misses are computed once: concurrent callers of one key share one loader
 * run — within the process by single-flight, across processes through Redis (look up or
 * lead in one round trip, store-release-announce in one more, waiters woken by pub/sub).
 */
export class DogpileCache extends EventEmitter<CacheEvents> {
  readonly options: ResolvedCacheOptions;
  private readonly backend: Backend;
  /** Expiry times of values this process has seen in Redis: where a plain GET will likely hit. */
  private readonly fresh: LRUCache<string, number> | undefined;
  private readonly inflight = new Map<string, Promise<Settled<unknown>>>();
  /** Plain GETs of values believed fresh, shared by concurrent readers of a key. */
  private readonly reads = new Map<string, Promise<StoredEntry | { corrupt: Error } | undefined>>();
  private degradedUntil = 0;
  private readonly pending = new Set<PendingCall>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private tokenCounter = 0;
  private closed = false;

  constructor(options: CacheOptions = {}) {
    super();
    this.options = resolveCacheOptions(options);
    const { redis } = this.options;
    const codec = new EntryCodec(this.options.serializer);
    if (redis === undefined) {
      this.backend = new MemoryBackend(this.options.maxEntries, codec);
    } else {
      const client = typeof redis === 'string' ? createClientFromUrl(redis) : redis;
      const { l1 } = this.options;
      this.backend = new RedisBackend(client, {
        prefix: this.options.prefix,
        codec,
        inlineMax: this.options.inlineMax,
        l1: l1 ? new L1(l1.max, l1.ttl) : undefined,
        ownsClient: typeof redis === 'string',
      });
      this.fresh = new LRUCache<string, number>({ max: FRESHNESS_HINTS, maxSize: KEY_HINTS_MAX_BYTES, sizeCalculation: (_v, k) => keyHintSize(k) });
    }
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
    if (
      !this.closed &&
      typeof key === 'string' &&
      key.length > 0 &&
      typeof loader === 'function' &&
      ((typeof ttlOrOptions === 'number' && ttlOrOptions > 0 && ttlOrOptions < Number.POSITIVE_INFINITY) ||
        (typeof ttlOrOptions === 'string' && isDuration(ttlOrOptions)))
    ) {
      const local = this.backend.peek(key);
      if (local !== undefined && local.kind === EntryKind.Value) {
        if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: this.backend.peekLayer });
        return Promise.resolve(local.value as T);
      }
      // A value this process saw in Redis and that has not expired: one bounded GET. A miss,
      // a marker, a corrupt value or a Redis failure goes on to the full protocol.
      if (!this.inflight.has(key) && this.believedFresh(key) && this.backendUsable(key)) {
        // Concurrent readers of one key share one GET.
        let read = this.reads.get(key);
        if (read === undefined) {
          read = this.timed(key, 'get', this.backend.get(key));
          this.reads.set(key, read);
        }
        const shared = read;
        return shared.then(
          (found) => {
            if (this.reads.get(key) === shared) this.reads.delete(key);
            if (found !== undefined && !('corrupt' in found) && found.kind === EntryKind.Value) {
              if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: 'store' });
              if (this.options.l1) this.remember(key, found);
              return found.value as T;
            }
            return this.resolve(key, loader, ttlOrOptions).then(valueOf);
          },
          () => {
            if (this.reads.get(key) === shared) this.reads.delete(key);
            return this.resolve(key, loader, ttlOrOptions).then(valueOf);
          },
        );
      }
    }
    return this.resolve(key, loader, ttlOrOptions).then(valueOf);
  }

  /** `getOrCompute` that also tells how the call was answered (used by the HTTP adapters). */
  async resolve<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): Promise<CacheResult<T>> {
    const opts = this.callOptions(key, loader, ttlOrOptions);
    this.assertOpen();
    if (opts.signal?.aborted) throw abortReason(opts.signal, key);

    const local = this.backend.peek(key);
    if (local?.kind === EntryKind.Value) {
      if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: this.backend.peekLayer });
      return { value: local.value as T, status: 'hit', createdAt: local.createdAt, degraded: false };
    }

    const existing = this.inflight.get(key) as Promise<Settled<T>> | undefined;
    if (existing) {
      if (this.listenerCount('coalesced') > 0) this.emit('coalesced', { key, remote: false });
      const settled = await this.joinFlight(existing, key, opts);
      if (settled === TIMED_OUT) {
        const own = await this.waitTimedOut(key, loader, opts);
        return { value: own.value, status: own.status, createdAt: own.createdAt, degraded: own.degraded };
      }
      if (settled.private) return this.pass(key, loader, opts, settled.degraded);
      if (settled.abandoned) return this.resolve(key, loader, ttlOrOptions);
      return {
        value: settled.value,
        status: settled.status === 'hit' ? 'hit' : 'coalesced',
        createdAt: settled.createdAt,
        degraded: settled.degraded,
      };
    }

    const flight = this.fly(key, loader, opts);
    // Callers joining the flight see an abandoned loader as ABANDONED (and look again), not as its error.
    const joined = flight.catch(rejoinIfAbandoned) as Promise<Settled<unknown>>;
    this.inflight.set(key, joined);
    const cleanup = () => {
      if (this.inflight.get(key) === joined) this.inflight.delete(key);
    };
    joined.then(cleanup, cleanup);
    const settled = await withSignal(flight, opts.signal, key);
    if (settled.marker) return this.pass(key, loader, opts, false);
    return { value: settled.value, status: settled.status, createdAt: settled.createdAt, degraded: settled.degraded };
  }

  /** The cached value of `key`, or `undefined`. Rejects with `BackendError` if Redis fails. */
  async get<T = unknown>(key: string): Promise<T | undefined> {
    validateKey(key);
    this.assertOpen();
    const local = this.backend.peek(key);
    if (local) return local.kind === EntryKind.Value ? (local.value as T) : undefined;
    let found;
    try {
      found = await this.timed(key, 'get', this.backend.get(key));
    } catch (error) {
      if (!this.keyFault(key, error)) throw error;
      return undefined;
    }
    if (found === undefined) return undefined;
    if ('corrupt' in found) {
      this.emit('corrupt', { key, error: found.corrupt });
      return undefined;
    }
    if (found.kind !== EntryKind.Value) return undefined;
    this.remember(key, found);
    return found.value as T;
  }

  /** Stores `value` under `key` for `ttl`. Rejects with `SerializationError` / `BackendError`. */
  async set<T>(key: string, value: T, ttl: Duration): Promise<void> {
    validateKey(key);
    const ttlMs = toMs(ttl, 'ttl');
    this.assertOpen();
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: Date.now(), ttl: ttlMs };
    await this.timed(key, 'set', this.backend.set(key, entry));
    this.remember(key, entry);
  }

  /**
   * Deletes `key`. Other processes' L1 copies (when `l1` is on) may still serve it for up to
   * `l1.ttl`. Rejects with `BackendError` if Redis fails.
   */
  async delete(key: string): Promise<boolean> {
    validateKey(key);
    this.assertOpen();
    this.fresh?.delete(key);
    return this.timed(key, 'delete', this.backend.delete(key));
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

  // --- the protocol ---------------------------------------------------------------

  private async fly<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const deadline = performance.now() + opts.waitTimeout;
    let skipValue = false;
    for (;;) {
      if (!this.backendUsable(key)) return this.runLocal(key, loader, opts, true);
      if (!skipValue && this.believedFresh(key)) {
        // This process saw the value and it has not expired: read it with a plain GET. Only a
        // key that is unknown here or expired goes to the lookup-or-lead script, so a miss
        // still costs one round trip and a hit costs what a GET costs.
        let found;
        try {
          found = await this.timed(key, 'get', this.backend.get(key));
        } catch (error) {
          if (!this.keyFault(key, error)) return this.runLocal(key, loader, opts, true);
          skipValue = true;
          continue;
        }
        if (found !== undefined) {
          if ('corrupt' in found) {
            this.emit('corrupt', { key, error: found.corrupt });
            skipValue = true;
            continue;
          }
          if (found.kind === EntryKind.HitForMiss) return MARKER as Settled<T>;
          if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: 'store' });
          this.remember(key, found);
          return { value: found.value as T, status: 'hit', createdAt: found.createdAt, degraded: false, private: false };
        }
        this.fresh?.delete(key);
      }
      const token = this.nextToken();
      let lookup;
      try {
        lookup = await this.timed(key, 'lookup', this.backend.lookup(key, token, opts.lockTtl, skipValue));
      } catch (error) {
        // A fault of this key: look again past its value; if even that fails, run without Redis
        // for this call only.
        if (!this.keyFault(key, error) || skipValue) return this.runLocal(key, loader, opts, true);
        skipValue = true;
        continue;
      }
      switch (lookup.kind) {
        case 'corrupt':
          this.emit('corrupt', { key, error: lookup.error });
          skipValue = true;
          continue;
        case 'hit': {
          const { entry } = lookup;
          if (entry.kind === EntryKind.HitForMiss) return MARKER as Settled<T>;
          if (this.listenerCount('hit') > 0) this.emit('hit', { key, layer: 'store' });
          this.remember(key, entry);
          return { value: entry.value as T, status: 'hit', createdAt: entry.createdAt, degraded: false, private: false };
        }
        case 'lead': {
          if (this.listenerCount('miss') > 0) this.emit('miss', { key });
          const led = await this.lead(key, token, loader, opts);
          if (led === RETRY) continue;
          return led;
        }
        case 'wait': {
          if (lookup.repaired) this.emit('corrupt', { key, error: lookup.repaired });
          if (this.listenerCount('coalesced') > 0) this.emit('coalesced', { key, remote: true });
          const waited = await this.waitRemote(key, loader, opts, deadline);
          if (waited === RETRY) continue;
          return waited;
        }
      }
    }
  }

  /** Step 3–4: run the loader holding the lead, then store, release and announce. */
  private async lead<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T> | typeof RETRY> {
    const controller = new AbortController();
    const renewal = this.backend.distributed
      ? new Renewal({
          ttl: opts.lockTtl,
          key,
          extend: () => this.timed(key, 'renew', this.backend.renew(key, token, opts.lockTtl)),
          onLost: (error) => {
            this.emit('lockLost', { key, error });
            controller.abort(error);
          },
        }).start()
      : undefined;
    let value: T;
    try {
      value = await loader({ key, signal: controller.signal });
    } catch (error) {
      await renewal?.stop();
      if (controller.signal.aborted && error === controller.signal.reason) return RETRY;
      if (error instanceof AbandonedLoad) {
        // Nothing to share and no error to announce: hand the lead back, with no marker.
        await this.commit(key, token, { mode: 'release' });
        throw error;
      }
      this.emit('loaderError', { key, error });
      await this.commit(key, token, { mode: 'error', name: errorName(error), message: errorMessage(error) });
      throw error;
    }
    await renewal?.stop();

    const createdAt = Date.now();
    const decision = this.decide(value, opts);
    if (decision === 'private') {
      const marker = opts.hitForMissTtl > 0 ? this.markerEntry(createdAt, opts.hitForMissTtl) : undefined;
      await this.commit(key, token, { mode: 'uncacheable', marker });
      return { value, status: 'miss', createdAt, degraded: false, private: true };
    }
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl };
    let committed;
    try {
      committed = await this.commit(key, token, { mode: decision, entry, sharedTtl: opts.lockTtl });
    } catch (error) {
      // The value cannot be encoded (nothing was sent): announce the error and release.
      await this.commit(key, token, { mode: 'error', name: errorName(error), message: errorMessage(error) });
      throw error;
    }
    if (committed && decision === 'store') this.remember(key, entry);
    return { value, status: 'miss', createdAt, degraded: committed === undefined, private: false };
  }

  /**
   * A caller joining this process's flight for the key waits at most its own `waitTimeout`
   * (then `onWaitTimeout` applies) and stops at once when its `signal` aborts; the flight
   * goes on for the others. Every timer and listener is removed when the wait ends.
   */
  private joinFlight<T>(flight: Promise<Settled<T>>, key: string, opts: CallOptions<T>): Promise<Settled<T> | typeof TIMED_OUT> {
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(abortReason(signal, key));
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        done();
        reject(abortReason(signal!, key));
      };
      const timer = setTimeout(() => {
        done();
        resolve(TIMED_OUT);
      }, opts.waitTimeout);
      signal?.addEventListener('abort', onAbort, { once: true });
      flight.then(
        (v) => {
          done();
          resolve(v);
        },
        (e: unknown) => {
          done();
          reject(e);
        },
      );
    });
  }

  /** Step 5: wait for the leader's announcement; take over when its lock runs out. */
  private async waitRemote<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, deadline: number): Promise<Settled<T> | typeof RETRY> {
    const wakeup = new Wakeup();
    let outcome: Outcome | null = null;
    let unlisten: () => void;
    try {
      unlisten = await this.timed(
        key,
        'subscribe',
        this.backend.listen(key, (o) => {
          if (o) outcome = o;
          wakeup.wake();
        }),
      );
    } catch {
      return this.runLocal(key, loader, opts, true);
    }
    try {
      for (;;) {
        const announced = outcome as Outcome | null;
        outcome = null;
        if (announced) {
          const result = announced.kind === 'shared' ? await this.readShared(key, loader, opts) : this.fromOutcome<T>(key, announced);
          if (result !== RETRY) return await result;
        }
        // Subscribed: look again, so an announcement made before the subscription is not missed.
        const token = this.nextToken();
        let lookup;
        try {
          lookup = await this.timed(key, 'lookup', this.backend.lookup(key, token, opts.lockTtl, false));
        } catch (error) {
          this.keyFault(key, error);
          return this.runLocal(key, loader, opts, true);
        }
        if (lookup.kind === 'corrupt') return RETRY;
        if (lookup.kind === 'hit') {
          if (lookup.entry.kind === EntryKind.HitForMiss) return MARKER as Settled<T>;
          this.remember(key, lookup.entry);
          return { value: lookup.entry.value as T, status: 'coalesced', createdAt: lookup.entry.createdAt, degraded: false, private: false };
        }
        if (lookup.kind === 'wait' && lookup.repaired) this.emit('corrupt', { key, error: lookup.repaired });
        if (lookup.kind === 'lead') {
          this.emit('miss', { key });
          return await this.lead(key, token, loader, opts);
        }
        const left = deadline - performance.now();
        if (left <= 0) return await this.waitTimedOut(key, loader, opts);
        // Woken by the announcement, or when the leader's lock runs out (leader gone).
        // No caller's signal here: the flight is shared; each caller's own signal is applied in resolve().
        await wakeup.sleep(Math.min(left, lookup.remaining >= 0 ? lookup.remaining + 1 : opts.lockTtl));
      }
    } finally {
      unlisten();
    }
  }

  /** A value shared but too big for the message: one GET of the copy the leader left for the waiters. */
  private async readShared<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T> | typeof RETRY> {
    let found;
    try {
      found = await this.timed(key, 'get', this.backend.getShared(key));
    } catch (error) {
      if (!this.keyFault(key, error)) return this.runLocal(key, loader, opts, true);
      return RETRY;
    }
    if (found === undefined) return RETRY;
    if ('corrupt' in found) {
      this.emit('corrupt', { key, error: found.corrupt });
      return RETRY;
    }
    return { value: found.value as T, status: 'coalesced', createdAt: found.createdAt, degraded: false, private: false };
  }

  private fromOutcome<T>(key: string, outcome: Outcome): Promise<Settled<T>> | typeof RETRY {
    switch (outcome.kind) {
      case 'value':
        if (outcome.stored) this.remember(key, outcome.entry);
        return Promise.resolve({ value: outcome.entry.value as T, status: 'coalesced', createdAt: outcome.entry.createdAt, degraded: false, private: false });
      case 'error': {
        const cause = new Error(outcome.message);
        cause.name = outcome.name;
        return Promise.reject(new LoaderError(`the loader for "${key}" failed in another process: ${outcome.message}`, { key, cause }));
      }
      case 'uncacheable':
        return Promise.resolve(MARKER as Settled<T>);
      case 'corrupt':
        this.emit('corrupt', { key, error: outcome.error });
        return RETRY;
      default:
        return RETRY;
    }
  }

  private async waitTimedOut<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    this.emit('waitTimeout', { key, waited: opts.waitTimeout });
    if (opts.onWaitTimeout === 'load') return this.passSettled(key, loader, opts);
    throw new WaitTimeoutError(
      `waited ${opts.waitTimeout} ms for another caller to compute "${key}"; raise waitTimeout, or set onWaitTimeout: 'load' to run the loader instead`,
      { key },
    );
  }

  /** Redis unusable: run the loader here (single-flight still applies); keep the value in L1 only. */
  private async runLocal<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<Settled<T>> {
    const value = await this.runLoader(key, loader);
    const createdAt = Date.now();
    const decision = this.decide(value, opts);
    if (decision === 'store') this.remember(key, { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl });
    return { value, status: 'miss', createdAt, degraded, private: decision === 'private' };
  }

  /** Runs this caller's own loader without coordination; stores the result if it is cacheable. */
  private async passSettled<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const value = await this.runLoader(key, loader);
    const createdAt = Date.now();
    const decision = this.decide(value, opts);
    let degraded = false;
    if (decision === 'store') {
      const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl };
      try {
        await this.timed(key, 'set', this.backend.set(key, entry));
        this.remember(key, entry);
      } catch (error) {
        if (error instanceof SerializationError) throw error;
        degraded = true;
      }
    }
    return { value, status: 'pass', createdAt, degraded, private: decision === 'private' };
  }

  private async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<CacheResult<T>> {
    const settled = await this.passSettled(key, loader, opts);
    return { value: settled.value, status: 'pass', createdAt: settled.createdAt, degraded: degraded || settled.degraded };
  }

  private async runLoader<T>(key: string, loader: Loader<T>): Promise<T> {
    try {
      return await loader({ key, signal: new AbortController().signal });
    } catch (error) {
      if (!(error instanceof AbandonedLoad)) this.emit('loaderError', { key, error });
      throw error;
    }
  }

  /** Store-and-release; a Redis failure here is reported, not thrown (undefined). */
  private async commit(key: string, token: string, commit: Commit): Promise<boolean | undefined> {
    try {
      return await this.timed(key, 'commit', this.backend.commit(key, token, commit));
    } catch (error) {
      if (error instanceof SerializationError) throw error;
      this.keyFault(key, error);
      return undefined;
    }
  }

  // --- helpers --------------------------------------------------------------------

  private decide<T>(value: T, opts: CallOptions<T>): CacheDecision {
    if (opts.cacheable) {
      const decision = opts.cacheable(value);
      if (decision !== 'store' && decision !== 'share' && decision !== 'private') {
        throw new InvalidOptionError('cacheable', `must return 'store', 'share' or 'private', got ${String(decision)}`);
      }
      return decision;
    }
    return value === undefined ? 'share' : 'store';
  }

  private markerEntry(createdAt: number, ttl: number): StoredEntry {
    return { kind: EntryKind.HitForMiss, value: undefined, createdAt, ttl };
  }

  /**
   * Keeps what this process learnt of a stored value: its expiry (the GET hint) and, with l1,
   * the value. The entry's expiry is wall-clock (createdAt is stored); what it has left is
   * turned into a monotonic deadline here, once, so a later step of the wall clock cannot
   * stretch a hint (a GET that finds nothing only costs one round trip anyway).
   */
  private remember(key: string, entry: StoredEntry): void {
    const left = Math.min(entry.createdAt + entry.ttl - Date.now(), entry.ttl);
    if (left <= 0) {
      this.fresh?.delete(key);
      return;
    }
    this.fresh?.set(key, performance.now() + left);
    this.backend.keep(key, entry, left);
  }

  private believedFresh(key: string): boolean {
    const freshUntil = this.fresh?.get(key);
    return freshUntil !== undefined && freshUntil > performance.now();
  }

  /** Redis may be tried now: not in a cooldown after a failure, and the client is not disconnected. */
  private backendUsable(key: string): boolean {
    if (performance.now() < this.degradedUntil) return false;
    if (this.backend.available()) return true;
    this.degradedUntil = performance.now() + this.options.backendCooldown;
    this.emit('backendError', { key, operation: 'connect', error: new BackendError('the Redis client is not connected', { key }) });
    return false;
  }

  /**
   * Bounds one backend call by `commandTimeout`; failures are reported and open the cooldown.
   * One sweep timer serves every pending call (no timer per command on the hot path), so a
   * call times out between commandTimeout and 1.25 × commandTimeout.
   */
  private timed<R>(key: string | undefined, operation: string, promise: Promise<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const call: PendingCall = { deadline: performance.now() + this.options.commandTimeout, key, operation, fail: undefined };
      const settle = (err: unknown) => {
        if (!this.pending.delete(call)) return;
        if (err instanceof SerializationError) {
          // The value cannot be encoded: the caller's error, found before anything was sent.
          reject(err);
          return;
        }
        const error = err instanceof BackendError ? err : new BackendError(`Redis ${operation} failed: ${errorMessage(err)}`, { key, cause: err });
        if (isKeyError(err)) {
          // The server answered, about this key only: no cooldown, no backendError.
          keyErrors.add(error);
          reject(error);
          return;
        }
        this.degradedUntil = performance.now() + this.options.backendCooldown;
        this.emit('backendError', { key, operation, error });
        reject(error);
      };
      call.fail = settle;
      this.pending.add(call);
      this.sweepTimer ??= this.startSweep();
      promise.then((v) => {
        if (this.pending.delete(call)) resolve(v);
      }, settle);
    });
  }

  /** Reports a failure that concerns only `key` (see redis/errors.ts) as `corrupt`; false for any other failure. */
  private keyFault(key: string, error: unknown): boolean {
    if (!(error instanceof Error) || !keyErrors.has(error)) return false;
    this.fresh?.delete(key);
    this.emit('corrupt', { key, error });
    return true;
  }

  private startSweep(): NodeJS.Timeout {
    const ms = this.options.commandTimeout;
    const timer = setInterval(() => {
      if (this.pending.size === 0) {
        clearInterval(timer);
        this.sweepTimer = undefined;
        return;
      }
      const now = performance.now();
      for (const call of this.pending) {
        if (call.deadline <= now) call.fail?.(new BackendError(`Redis did not answer ${call.operation} within ${ms} ms (commandTimeout)`, { key: call.key }));
      }
    }, Math.max(5, Math.floor(ms / 4)));
    timer.unref();
    return timer;
  }

  private nextToken(): string {
    this.tokenCounter = (this.tokenCounter + 1) % Number.MAX_SAFE_INTEGER;
    return `${PROCESS_TOKEN}${this.tokenCounter.toString(36)}`;
  }

  private assertOpen(): void {
    if (this.closed) throw new CacheClosedError('the cache is closed; create a new one with createCache()');
  }

  private callOptions<T>(key: string, loader: Loader<T>, ttlOrOptions: Duration | GetOrComputeOptions<T>): CallOptions<T> {
    validateKey(key);
    if (typeof loader !== 'function') throw new InvalidOptionError('loader', `expected a function, got ${loader === null ? 'null' : typeof loader}`);
    if (ttlOrOptions === undefined || ttlOrOptions === null) {
      throw new InvalidOptionError('ttl', "is required: pass milliseconds, a string like '30s', or { ttl }");
    }
    if (typeof ttlOrOptions !== 'object') {
      return {
        ttl: toMs(ttlOrOptions, 'ttl'),
        lockTtl: this.options.lockTtl,
        waitTimeout: this.options.waitTimeout,
        onWaitTimeout: this.options.onWaitTimeout,
        signal: undefined,
        cacheable: undefined,
        hitForMissTtl: this.options.hitForMissTtl,
      };
    }
    const o = ttlOrOptions;
    if (o.onWaitTimeout !== undefined && o.onWaitTimeout !== 'throw' && o.onWaitTimeout !== 'load') {
      throw new InvalidOptionError('onWaitTimeout', `expected 'throw' or 'load', got ${String(o.onWaitTimeout)}`);
    }
    if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new InvalidOptionError('signal', 'must be an AbortSignal');
    if (o.cacheable !== undefined && typeof o.cacheable !== 'function') throw new InvalidOptionError('cacheable', 'must be a function');
    return {
      ttl: toMs(o.ttl, 'ttl'),
      lockTtl: o.lockTtl === undefined ? this.options.lockTtl : toMs(o.lockTtl, 'lockTtl'),
      waitTimeout: o.waitTimeout === undefined ? this.options.waitTimeout : toMs(o.waitTimeout, 'waitTimeout'),
      onWaitTimeout: o.onWaitTimeout ?? this.options.onWaitTimeout,
      signal: o.signal,
      cacheable: o.cacheable,
      hitForMissTtl: o.hitForMissTtl === undefined ? this.options.hitForMissTtl : toMs(o.hitForMissTtl, 'hitForMissTtl', { allowZero: true }),
    };
  }
}

function valueOf<T>(result: CacheResult<T>): T {
  return result.value;
}

function withSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined, key: string): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal, key));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal, key));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'Error';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
