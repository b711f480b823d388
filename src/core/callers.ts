import { debug } from '../shared/diagnostics.js';
import type { Duration } from '../shared/duration.js';
import { RemoteLoaderError } from '../shared/errors.js';
import { resolveCallOptions, type CallOptions } from './call-options.js';
import { coalesced, type CacheEmitter } from './events.js';
import { Flights, withSignal } from './flights.js';
import { Joiners, type Answer } from './joiners.js';
import type { MissProtocol } from './miss-protocol.js';
import type { ResolvedCacheOptions } from './options.js';
import { TIMED_OUT, type Answered, type Settled } from './settled.js';
import type { CacheResult, Loader } from './types.js';

/**
 * The callers of a cache that do not lead: plain callers joined to this process's flight
 * (answered in bulk when it settles), and callers whose flight ended in their own loader run
 * (a private result or a marker: `pass`; a loader failed in another process: `afterRemoteError`).
 */
export class Callers {
  /** Loader runs after a loader failed in another process (`onRemoteError: 'load'`), one per key. */
  private readonly reruns = new Flights();

  constructor(
    private readonly options: ResolvedCacheOptions,
    private readonly protocol: MissProtocol,
    private readonly events: CacheEmitter,
    /** The full call (`resolve` without tracing), for a caller whose flight was abandoned. */
    private readonly resolveCall: <T>(key: string, loader: Loader<T>, ttl: Duration) => Promise<CacheResult<T>>,
  ) {}

  /**
   * A plain caller (no signal, the cache's waitTimeout) joins this process's flight: answered
   * with the flight's value, or, for the rare endings, as `resolveCall` would answer it.
   */
  joinPlain<T>(key: string, loader: Loader<T>, ttl: Duration, flight: Promise<Settled<unknown>>): Promise<T> {
    const opts = this.plainOptions(key, loader, ttl);
    const stale = this.protocol.refreshes.staleWhileRefreshing<T>(key, opts);
    if (stale) return Promise.resolve(stale.value);
    coalesced(this.events, key, false, undefined);
    if (debug.enabled) debug('join key=%s: a loader of this process is running', key);
    return this.joiners.join(key, flight, opts.waitTimeout, loader as Loader<unknown>, ttl) as Promise<T>;
  }

  /** Answers a plain caller of a settled flight (see `joinPlain`). */
  private readonly answerJoiner = (key: string, answer: Answer, loader: Loader<unknown>, ttl: Duration, settled: Settled<unknown> | undefined, error: unknown): void => {
    const opts = this.plainOptions(key, loader, ttl);
    const answered = settled === undefined ? this.afterRemoteError(error, key, loader, opts) : this.afterJoin(settled, key, loader, opts, () => this.resolveCall(key, loader, ttl));
    // Resolved with a promise: the caller's settles as it does, rejection included.
    answer(Promise.resolve(answered).then(valueOf));
  };

  /** A plain caller's waitTimeout passed before the flight settled. */
  private readonly expireJoiner = (key: string, answer: Answer, loader: Loader<unknown>, ttl: Duration): void => {
    answer(this.protocol.local.waitTimedOut(key, loader, this.plainOptions(key, loader, ttl)).then(settledValue));
  };

  private readonly joiners = new Joiners<Loader<unknown>, Duration>(this.answerJoiner, this.expireJoiner);

  /** The plain callers joined to `flight` are answered with `settled` now (another process's value, heard). */
  answerEarly(flight: Promise<Settled<unknown>>, settled: Settled<unknown>): void {
    this.joiners.answer(flight, settled);
  }

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

  /**
   * A caller joins `flight`, the run of `key` this process has going in `flights` (the forced
   * refreshes' or the others'): answered with a stale value while a refresh runs (not when it
   * forces one), else once the flight settles (`afterJoin`), or past its wait as a timed-out
   * waiter is.
   */
  async join<T>(flights: Flights, flight: Promise<Settled<T>>, key: string, loader: Loader<T>, opts: CallOptions<T>, again: () => Promise<CacheResult<T>>): Promise<CacheResult<T>> {
    const stale = opts.forceRefresh ? undefined : this.protocol.refreshes.staleWhileRefreshing<T>(key, opts);
    if (stale) return result(stale);
    coalesced(this.events, key, false, opts.onJoin);
    if (debug.enabled) debug('join key=%s: a loader of this process is running', key);
    let settled;
    try {
      settled = await flights.join(flight, key, opts);
    } catch (error) {
      return this.afterRemoteError(error, key, loader, opts);
    }
    if (settled === TIMED_OUT) return result(await this.protocol.local.waitTimedOut(key, loader, opts));
    return this.afterJoin(settled, key, loader, opts, again);
  }

  /**
   * How a caller that joined this process's flight is answered once it settled: with the
   * flight's value; by its own loader run (a private result or a marker; `degraded` carries
   * over); or by the whole call again (`again`: the flight's loader was abandoned).
   */
  afterJoin<T>(settled: Settled<T>, key: string, loader: Loader<T>, opts: CallOptions<T>, again: () => Promise<CacheResult<T>>): CacheResult<T> | Promise<CacheResult<T>> {
    switch (settled.kind) {
      case 'shared':
        return result(settled, settled.status === 'hit' ? 'hit' : 'coalesced');
      case 'own':
        return this.pass(key, loader, opts, settled.degraded);
      case 'marker':
        return this.pass(key, loader, opts, false);
      case 'abandoned':
        return again();
    }
  }

  /** This caller runs its own loader (a private result or a marker); `degraded` carries over from the flight. */
  async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<CacheResult<T>> {
    const settled = await this.protocol.local.pass(key, loader, opts);
    return { value: settled.value, status: 'pass', createdAt: settled.createdAt, degraded: degraded || settled.degraded };
  }

  /**
   * The flight failed. When its loader failed in another process and this caller asked for
   * `onRemoteError: 'load'`, it runs its loader itself, once per key for the callers of this
   * process that do the same; any other error is passed on.
   */
  async afterRemoteError<T>(error: unknown, key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<CacheResult<T>> {
    if (opts.onRemoteError !== 'load' || !(error instanceof RemoteLoaderError)) throw error;
    const running = this.reruns.get<T>(key);
    if (running) {
      const settled = await withSignal(running, opts.signal, key);
      return this.afterJoin(settled, key, loader, opts, () => this.afterRemoteError(error, key, loader, opts));
    }
    const flight = this.protocol.local.afterRemoteError(key, loader, opts);
    this.reruns.start(key, flight);
    return result(await withSignal(flight, opts.signal, key));
  }
}

export function result<T>(settled: Answered<T>, status = settled.status): CacheResult<T> {
  if (settled.kind === 'shared' && settled.status === 'stale') return { value: settled.value, status: 'stale', staleReason: settled.staleReason, createdAt: settled.createdAt, degraded: settled.degraded };
  return { value: settled.value, status, createdAt: settled.createdAt, degraded: settled.degraded };
}

export function valueOf<T>(r: CacheResult<T>): T {
  return r.value;
}

function settledValue<T>(s: Answered<T>): T {
  return s.value;
}
