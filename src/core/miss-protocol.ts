import { monotonicNow } from '../shared/clock.js';
import { randomBytes } from 'node:crypto';
import { Renewal } from '../lock/renewal.js';
import { BackendError, LoaderError, LoaderTimeoutError, SerializationError, WaitTimeoutError } from '../shared/errors.js';
import { debug, traceLoader } from '../shared/diagnostics.js';
import { Wakeup } from '../shared/wait.js';
import { EntryKind } from '../store/entry.js';
import type { Commit, Lookup, Outcome, StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import type { CacheEmitter } from './events.js';
import type { GuardedBackend } from './guarded-backend.js';
import { errorMessage } from './guarded-backend.js';
import type { FreshnessHints } from './hints.js';
import { earlyRefreshDue, isFresh, withinRevalidate, withinStaleIfError, type FreshnessRules } from './freshness.js';
import { AbandonedLoad, MARKER, RETRY, type Settled } from './settled.js';
import type { Loader, LoaderContext } from './types.js';
import { RefreshingElsewhere } from './refreshing-elsewhere.js';
import { decide, errorCommit, errorName, loaderContext, valueEntry, type Decided, type Declared } from './verdict.js';

const PROCESS_TOKEN = randomBytes(8).toString('hex');

/** The `LoaderError`s that tell of a loader that failed in another process. */
const remoteErrors = new WeakSet<Error>();

/** True for the `LoaderError` of a loader that failed in another process (what `onRemoteError` is about). */
export function isRemoteLoaderError(error: unknown): boolean {
  return error instanceof Error && remoteErrors.has(error);
}

/**
 * The protocol on a miss (see "The protocol on a miss" in docs/design.md): look up or lead in one
 * round trip; the leader runs the loader holding a renewed lock, then stores, releases and
 * announces (commit); waiters listen for the announcement and take over when the lock runs
 * out. Every way of ending is a `Settled` for the callers of this process's flight.
 */
export class MissProtocol {
  private tokenCounter = 0;
  /** Refreshes of stored values running in this process (background or foreground), by key. */
  private readonly refreshes = new Map<string, Refresh>();
  /** Keys whose early refresh this process tried and found led elsewhere: no new try until then (monotonic ms). */
  private readonly earlyThrottle = new Map<string, number>();

  /** Stale values whose refresh another process runs: answered without asking Redis again. */
  private readonly elsewhere: RefreshingElsewhere;

  constructor(
    private readonly backend: GuardedBackend,
    private readonly hints: FreshnessHints,
    private readonly events: CacheEmitter,
  ) {
    this.elsewhere = new RefreshingElsewhere(backend);
  }

  /** Stops following the channels of keys refreshed elsewhere. */
  close(): void {
    this.elsewhere.clear();
    for (const refresh of this.refreshes.values()) refresh.unlisten?.();
  }

  /**
   * `key` was written or deleted by this process: a refresh running here no longer answers
   * its stale value (the write is newer), and its result will not be stored over the write.
   */
  wrote(key: string): void {
    const refresh = this.refreshes.get(key);
    if (refresh) refresh.superseded = true;
  }

  /**
   * The flight of `key` for the callers of this process. `early`, if given, is called with the
   * answer as soon as another process's announcement of a value is heard, before the waiting
   * step's own bookkeeping (freshness hint, unsubscribing) and the promise hops back to the
   * flight: the callers joined to the flight can be answered from the listener itself.
   */
  async fly<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, early?: (settled: Settled<T>) => void): Promise<Settled<T>> {
    const deadline = monotonicNow() + opts.waitTimeout;
    // A forced refresh looks past the values stored before it began: it leads, or waits for
    // the run in flight and takes the value that run stores.
    const forcedSince = opts.forceRefresh ? this.backend.now() : undefined;
    let skipValue: boolean | number = forcedSince ?? false;
    for (;;) {
      if (!this.backend.usable(key)) return this.runLocal(key, loader, opts, true);
      // A refresh of the key runs here or in another process: its stale value is the answer.
      const refreshing = opts.forceRefresh ? undefined : this.staleWhileRefreshing<T>(key, opts);
      if (refreshing) return refreshing;
      const elsewhere = opts.forceRefresh ? undefined : this.elsewhere.get(key);
      if (elsewhere !== undefined && withinRevalidate(elsewhere, this.backend.now(), opts.freshness)) return this.staleAnswer(key, elsewhere, 'revalidate');
      if (!skipValue && this.hints.believedFresh(key)) {
        // This process saw the value and it has not expired: read it with a plain GET. Only a
        // key that is unknown here or expired goes to the lookup-or-lead script, so a miss
        // still costs one round trip and a hit costs what a GET costs.
        let found;
        try {
          found = await this.backend.get(key);
        } catch (error) {
          if (!this.backend.keyFault(key, error)) return this.runLocal(key, loader, opts, true);
          skipValue = true;
          continue;
        }
        if (found !== undefined) {
          if ('corrupt' in found) {
            this.events.emit('corrupt', { key, error: found.corrupt });
            skipValue = true;
            continue;
          }
          if (isFresh(found, this.backend.now())) return this.hitFrom(key, found, 'hit', loader, opts);
        }
        this.hints.forget(key);
      }
      const token = this.nextToken();
      const sentAt = monotonicNow();
      let lookup;
      try {
        lookup = await this.backend.lookup(key, token, opts.lockTtl, skipValue, false, !this.refreshes.has(key));
      } catch (error) {
        // A fault of this key: look again past its value; if even that fails, run without Redis
        // for this call only.
        if (!this.backend.keyFault(key, error) || skipValue) return this.runLocal(key, loader, opts, true);
        skipValue = true;
        continue;
      }
      switch (lookup.kind) {
        case 'corrupt':
          this.events.emit('corrupt', { key, error: lookup.error });
          skipValue = true;
          continue;
        case 'hit':
          this.elsewhere.forget(key);
          return this.hitFrom(key, lookup.entry, 'hit', loader, opts);
        case 'stale':
          return this.fromStale(key, token, lookup, loader, opts, deadline, sentAt);
        case 'lead': {
          this.elsewhere.forget(key);
          if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
          if (debug.enabled) debug('lead key=%s: no value, this process runs the loader', key);
          const led = await this.lead(key, token, loader, opts, undefined, early);
          if (led === RETRY) continue;
          return led;
        }
        case 'wait': {
          this.elsewhere.forget(key);
          if (lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
          if (this.events.listenerCount('coalesced') > 0) this.events.emit('coalesced', { key, remote: true });
          if (debug.enabled) debug('wait key=%s: another process leads, its lock expires in %d ms', key, lookup.remaining);
          const waited = await this.waitRemote(key, loader, opts, deadline, early, forcedSince);
          if (waited === RETRY) continue;
          return waited;
        }
      }
    }
  }

  /** Runs this caller's own loader without coordination; stores the result if it is cacheable. */
  async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const started = monotonicNow();
    const { value, declared } = await this.runLoader(key, loader);
    const createdAt = this.backend.now();
    const decided = decide(value, opts, declared);
    const { decision } = decided;
    let degraded = false;
    if (decision === 'store') {
      const entry = valueEntry(value, createdAt, decided, opts, monotonicNow() - started);
      try {
        // A loader's value, stored beside a lead that may be running (not a write that supersedes it).
        await this.backend.set(key, entry, false);
        this.hints.remember(key, entry);
      } catch (error) {
        if (error instanceof SerializationError) throw error;
        degraded = true;
      }
    }
    return { value, status: 'pass', createdAt, degraded, private: decision === 'private' };
  }

  /**
   * The loader failed in another process and this caller asked for `onRemoteError: 'load'`:
   * it runs its own loader, once for the callers of this process that do the same (the
   * flight), without coordination and without storing the result.
   */
  async loadAfterRemoteError<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const { value, declared } = await this.runLoader(key, loader);
    return { value, status: 'miss', createdAt: this.backend.now(), degraded: false, private: decide(value, opts, declared).decision === 'private' };
  }

  async waitTimedOut<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    this.events.emit('waitTimeout', { key, waited: opts.waitTimeout });
    if (opts.onWaitTimeout === 'load') return this.pass(key, loader, opts);
    throw new WaitTimeoutError(
      `waited ${opts.waitTimeout} ms for another caller to compute "${key}"; raise waitTimeout, or set onWaitTimeout: 'load' to run the loader instead`,
      { key },
    );
  }

  /**
   * An entry found in the store, as the answer: a hit-for-miss marker sends every caller to
   * its own loader; a value is remembered (freshness hint, L1) and answered as `status`.
   */
  private hitFrom<T>(key: string, entry: StoredEntry, status: 'hit' | 'coalesced', loader?: Loader<T>, opts?: CallOptions<T>): Settled<T> {
    if (entry.kind === EntryKind.HitForMiss) return MARKER as Settled<T>;
    if (status === 'hit' && this.events.listenerCount('hit') > 0) this.events.emit('hit', { key, layer: 'store' });
    this.hints.remember(key, entry);
    if (loader && opts) this.afterHit(key, entry, loader, opts);
    return answer(entry, status);
  }

  /**
   * Early refresh (XFetch): on a hit, a draw decides whether this caller starts a background
   * refresh now; it never waits for it. The lead lock makes simultaneous winners cost one run;
   * a process that finds the lock taken does not try again for Δ (at least 50 ms).
   */
  afterHit<T>(key: string, entry: StoredEntry, loader: Loader<T>, opts: CallOptions<T>): void {
    const beta = opts.freshness.earlyRefreshBeta;
    if (beta <= 0 || entry.kind !== EntryKind.Value || this.refreshes.has(key)) return;
    const now = this.backend.now();
    if (!earlyRefreshDue(entry, now, beta)) return;
    const throttled = this.earlyThrottle.get(key);
    if (throttled !== undefined && throttled > monotonicNow()) return;
    this.earlyThrottle.delete(key);
    if (!this.backend.usable(key)) return;
    const token = this.nextToken();
    const gate = this.backend.tryLead(key, token, opts.lockTtl).then(
      async (led) => {
        if (!led) {
          if (this.earlyThrottle.size > 10_000) this.earlyThrottle.clear();
          this.earlyThrottle.set(key, monotonicNow() + Math.max(50, entry.delta ?? 0));
          return;
        }
        // The draw was made on `entry`: if another refresh replaced it meanwhile (and let go of
        // the lock), that refresh was this one; hand the lead back instead of running again.
        const current = await this.backend.get(key).catch(() => undefined);
        if (current === undefined || 'corrupt' in current || current.createdAt !== entry.createdAt) {
          await this.commit(key, token, { mode: 'release' });
          return;
        }
        this.refreshInBackground(key, token, loader, opts, entry);
      },
      () => {},
    );
    void gate;
  }

  /**
   * While this process refreshes `key` and its stale value is inside `staleWhileRevalidate`,
   * that value as the answer (callers of this process do not wait for the refresh either).
   */
  staleWhileRefreshing<T>(key: string, opts: CallOptions<T>): Settled<T> | undefined {
    const running = this.refreshes.get(key);
    if (running === undefined || running.superseded || !withinRevalidate(running.entry, this.backend.now(), opts.freshness)) return undefined;
    // Shared store: only while the key's channel would tell of a write, and once a lookup sent
    // while it did confirmed the stale value is still the stored one. The channel is followed
    // from the first call that asks (a refresh no one asks about again costs no subscription).
    if (this.backend.distributed) {
      if (!running.following) this.followRefresh(key, running);
      if (!(running.confirmed && this.backend.live(key))) return undefined;
    }
    // A tag of the value invalidated since it was looked up: no longer an answer, stale or not.
    const entry = running.entry.tags === undefined ? running.entry : this.backend.backend.withKnownTags(running.entry);
    if (entry === undefined) return undefined;
    return this.staleAnswer(key, entry, 'revalidate');
  }

  /**
   * The lookup found a value past its `ttl`. Inside `staleWhileRevalidate` it is the answer at
   * once, and the caller that took the lead starts one refresh in the background. Past it, the
   * stale value is the fallback of a miss: the leader loads (the value is served on failure
   * under `staleIfError`, or after `softTimeout`), the others wait for it with the same fallback,
   * or take it at once while a failed refresh holds the lock (`failSafeRetry`).
   */
  private async fromStale<T>(
    key: string,
    token: string,
    lookup: Extract<Lookup, { kind: 'stale' }>,
    loader: Loader<T>,
    opts: CallOptions<T>,
    deadline: number,
    /** When the lookup was sent (monotonic ms). */
    sentAt: number,
  ): Promise<Settled<T>> {
    const { entry } = lookup;
    if (entry.kind !== EntryKind.Value) return MARKER as Settled<T>;
    this.hints.remember(key, entry);
    const now = this.backend.now();
    const rules = opts.freshness;
    if (withinRevalidate(entry, now, rules)) {
      if (lookup.lead && opts.inlineRefresh) {
        if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
        const inline = this.trackRefresh(key, entry, this.lead(key, token, loader, opts, entry));
        inline.catch(() => {
          /* the caller that leads gets the error */
        });
        return { ...this.staleAnswer<T>(key, entry, 'revalidate'), inline };
      }
      if (lookup.lead) this.refreshInBackground(key, token, loader, opts, entry);
      // Refreshed by another process: later flights here answer this value until it is over.
      else if (!lookup.hold && !this.refreshes.has(key)) this.elsewhere.heard(key, entry, lookup.remaining, sentAt);
      else this.confirmRefresh(key, entry, sentAt);
      // While a failed refresh holds the lock (failSafeRetry), the stale value is served because of that error.
      return this.staleAnswer(key, entry, lookup.hold ? 'error' : 'revalidate');
    }
    if (lookup.lead) {
      if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
      const refresh = this.trackRefresh(key, entry, this.lead(key, token, loader, opts, entry));
      return this.softly(key, refresh, entry, opts);
    }
    if (lookup.hold && withinStaleIfError(entry, now, rules)) {
      // A refresh failed moments ago: no new attempt before failSafeRetry, fleet-wide.
      return this.failSafe(key, entry, new LoaderError(`the last refresh of "${key}" failed; retrying after failSafeRetry`, { key }), false);
    }
    if (this.events.listenerCount('coalesced') > 0) this.events.emit('coalesced', { key, remote: true });
    const running = this.refreshes.get(key)?.settled as Promise<Settled<T>> | undefined;
    const waited: Promise<Settled<T>> = running
      ? running.then((settled) => (settled.status === 'stale' ? settled : { ...settled, status: 'coalesced' }))
      : this.waitRemote(key, loader, opts, deadline).then((w) => (w === RETRY ? this.fly(key, loader, opts) : w));
    const guarded = waited.catch((error: unknown) => {
      if (error instanceof WaitTimeoutError || !withinStaleIfError(entry, this.backend.now(), rules)) throw error;
      return this.failSafe<T>(key, entry, error, false);
    });
    return this.softly(key, guarded, entry, opts);
  }

  /** The stale value as the answer, reported by a `stale` event. */
  private staleAnswer<T>(key: string, entry: StoredEntry, reason: 'revalidate' | 'error' | 'timeout', degraded = false): Settled<T> {
    const age = this.backend.now() - entry.createdAt;
    if (debug.enabled) debug('stale key=%s: a stale value served (%s), %d ms old', key, reason, age);
    if (this.events.listenerCount('stale') > 0) this.events.emit('stale', { key, reason, age });
    return { value: entry.value as T, status: 'stale', staleReason: reason, createdAt: entry.createdAt, degraded, private: false };
  }

  /** A refresh or a miss failed and the stale value is served instead (`staleIfError`). */
  private failSafe<T>(key: string, entry: StoredEntry, error: unknown, degraded: boolean): Settled<T> {
    this.events.emit('failSafe', { key, error });
    return this.staleAnswer(key, entry, 'error', degraded);
  }

  /** With `softTimeout`, the stale value answers callers still waiting after it; the loader goes on. */
  private softly<T>(key: string, work: Promise<Settled<T>>, entry: StoredEntry, opts: CallOptions<T>): Promise<Settled<T>> {
    const soft = opts.freshness.softTimeout;
    if (soft <= 0) return work;
    return new Promise<Settled<T>>((resolve, reject) => {
      const timer = setTimeout(() => resolve(this.staleAnswer(key, entry, 'timeout')), soft);
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

  /** Remembers a refresh running in this process, so its other callers join it and no second one starts here. */
  private trackRefresh<T>(key: string, entry: StoredEntry, refresh: Promise<Settled<T> | typeof RETRY>): Promise<Settled<T>> {
    const settled = refresh.then((r) => {
      if (r === RETRY) throw new LoaderError(`the lead of "${key}" was lost during its refresh`, { key });
      return r;
    });
    const tracked: Refresh = { settled: settled as Promise<Settled<unknown>>, entry, liveAt: undefined, confirmed: false, superseded: false, following: false, unlisten: undefined, ended: false };
    this.refreshes.set(key, tracked);
    const forget = () => {
      tracked.ended = true;
      tracked.unlisten?.();
      if (this.refreshes.get(key) === tracked) this.refreshes.delete(key);
    };
    settled.then(forget, forget);
    return settled;
  }

  /**
   * Follows the channel of a key refreshed here: any news of it while it refreshes (a write or
   * delete elsewhere, a reconnect) ends the stale answers from memory, and later callers ask Redis.
   */
  private followRefresh(key: string, tracked: Refresh): void {
    tracked.following = true;
    this.backend
      .listen(key, () => {
        tracked.superseded = true;
      })
      .then(
        (unlisten) => {
          if (tracked.ended) return unlisten();
          tracked.unlisten = unlisten;
          tracked.liveAt = monotonicNow();
        },
        () => {
          tracked.superseded = true;
        },
      );
  }

  /** A lookup sent at `sentAt` found the stale value of a refresh running here still stored: answered from memory from now on, if the channel was live. */
  private confirmRefresh(key: string, entry: StoredEntry, sentAt: number): void {
    const running = this.refreshes.get(key);
    if (running === undefined || running.liveAt === undefined || sentAt < running.liveAt || running.entry.createdAt !== entry.createdAt) return;
    running.confirmed = true;
  }

  /** One refresh, detached from every caller: its result is stored and announced when it arrives. */
  private refreshInBackground<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>, entry: StoredEntry): void {
    // The callers' signals and waits do not apply to a refresh no one waits for.
    const own: CallOptions<T> = { ...opts, signal: undefined, background: true };
    this.trackRefresh(key, entry, this.lead(key, token, loader, own, entry)).catch(() => {
      /* reported by the refresh and loaderError events */
    });
  }

  /**
   * Step 3–4: run the loader holding the lead, then store, release and announce. With
   * `fallback` (a stored value being refreshed) the run is a refresh: reported by `refresh`
   * events, and a failure under `staleIfError` answers the fallback and keeps the lock for
   * `failSafeRetry` (no new attempt fleet-wide until then). `hardTimeout` gives the loader up:
   * its signal aborts with `LoaderTimeoutError`, and the run has failed like any other. A
   * failure after the loader returned (its verdict, its entry, its encoding) lets go of the
   * lock at once and announces the error. `early`, if
   * given, is called with the answer as soon as the value's commit is on its way (its callers
   * need not wait for Redis's reply: the flight's value is the loader's whatever the commit's fate).
   */
  private async lead<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>, fallback?: StoredEntry, early?: (settled: Settled<T>) => void): Promise<Settled<T> | typeof RETRY> {
    const controller = new AbortController();
    const rules = opts.freshness;
    const renewal = this.backend.distributed
      ? new Renewal({
          ttl: opts.lockTtl,
          key,
          extend: () => this.backend.renew(key, token, opts.lockTtl),
          onLost: (error) => {
            this.events.emit('lockLost', { key, error });
            controller.abort(error);
          },
        }).start()
      : undefined;
    const started = monotonicNow();
    const refreshEnd = (outcome: 'stored' | 'error' | 'timeout' | 'lost') => {
      if (!fallback) return;
      const duration = monotonicNow() - started;
      if (debug.enabled) debug('refresh key=%s ended after %d ms: %s', key, Math.round(duration), outcome);
      this.events.emit('refresh', { key, phase: 'end', duration, outcome });
    };
    if (fallback) {
      if (debug.enabled) debug('refresh key=%s started', key);
      this.events.emit('refresh', { key, phase: 'start' });
    }
    let hardTimer: NodeJS.Timeout | undefined;
    let value: T;
    let context: LoaderContext;
    let declared: Declared;
    try {
      ({ context, declared } = loaderContext(key, controller.signal, fallback ? { value: fallback.value, createdAt: fallback.createdAt } : undefined));
      const run = Promise.resolve().then(() => traceLoader(key, opts.background === true, false, () => loader(context)));
      value = await (rules.hardTimeout > 0
        ? Promise.race([
            run,
            new Promise<never>((_, reject) => {
              hardTimer = setTimeout(() => {
                const error = new LoaderTimeoutError(`the loader for "${key}" did not settle within ${rules.hardTimeout} ms (hardTimeout)`, { key });
                controller.abort(error);
                reject(error);
              }, rules.hardTimeout);
            }),
          ])
        : run);
    } catch (error) {
      clearTimeout(hardTimer);
      await renewal?.stop();
      if (error instanceof LoaderTimeoutError) {
        // Given up: a failed run like any other (the callers get the stale value or this error,
        // and a refresh under staleIfError holds the lead for failSafeRetry).
        this.events.emit('loaderError', { key, error });
        return this.failed(key, token, error, rules, fallback, () => refreshEnd('timeout'));
      }
      if (controller.signal.aborted && error === controller.signal.reason) {
        refreshEnd('lost');
        return RETRY;
      }
      if (error instanceof AbandonedLoad) {
        // Nothing to share and no error to announce: hand the lead back, with no marker.
        await this.commit(key, token, { mode: 'release' });
        refreshEnd('error');
        throw error;
      }
      this.events.emit('loaderError', { key, error });
      return this.failed(key, token, error, rules, fallback, () => refreshEnd('error'));
    }
    clearTimeout(hardTimer);
    await renewal?.stop();
    const delta = monotonicNow() - started;
    if (debug.enabled) debug('loaded key=%s in %d ms', key, Math.round(delta));

    const createdAt = this.backend.now();
    let decision: Decided['decision'];
    let entry: StoredEntry | undefined;
    let committed;
    try {
      const decided = decide(value, opts, declared);
      decision = decided.decision;
      if (decision === 'private') {
        const marker: StoredEntry | undefined =
          opts.hitForMissTtl > 0 ? { kind: EntryKind.HitForMiss, value: undefined, createdAt, ttl: opts.hitForMissTtl } : undefined;
        await this.commit(key, token, { mode: 'uncacheable', marker });
      } else {
        entry = valueEntry(value, createdAt, decided, opts, delta);
        const sent = early === undefined ? undefined : () => early({ value, status: 'miss', createdAt, degraded: false, private: false });
        committed = await this.commit(key, token, { mode: decision, entry, sharedTtl: opts.lockTtl, sent });
      }
    } catch (error) {
      // The verdict threw or was invalid, or the value cannot be encoded (nothing was stored
      // or sent): announce the error and let go of the lead at once, so no waiter waits it out.
      await this.commit(key, token, errorCommit(error));
      refreshEnd('error');
      throw error;
    }
    if (decision === 'private') {
      refreshEnd('stored');
      return { value, status: 'miss', createdAt, degraded: false, private: true };
    }
    if (committed && decision === 'store') this.hints.remember(key, entry!);
    refreshEnd(committed === false ? 'lost' : 'stored');
    return { value, status: 'miss', createdAt, degraded: committed === undefined, private: false };
  }

  /**
   * A run that failed (the loader threw, or `hardTimeout` gave it up). With a stale value
   * under `staleIfError`, that value is the answer and the lead is kept as a hold for
   * `failSafeRetry` (the error is announced, and no process tries again before then); else the
   * error is announced, the lead let go, and the error thrown. `ended` runs once the lead is settled.
   */
  private async failed<T>(key: string, token: string, error: unknown, rules: FreshnessRules, fallback: StoredEntry | undefined, ended: () => void): Promise<Settled<T>> {
    if (fallback && withinStaleIfError(fallback, this.backend.now(), rules)) {
      await this.commit(key, token, { mode: 'fail', name: errorName(error), message: errorMessage(error), holdMs: rules.failSafeRetry });
      ended();
      return this.failSafe(key, fallback, error, false);
    }
    await this.commit(key, token, errorCommit(error));
    ended();
    throw error;
  }

  /** Step 5: wait for the leader's announcement; take over when its lock runs out. */
  private async waitRemote<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, deadline: number, early?: (settled: Settled<T>) => void, forcedSince?: number): Promise<Settled<T> | typeof RETRY> {
    const wakeup = new Wakeup();
    const waitStart = debug.enabled ? monotonicNow() : 0;
    let outcome: Outcome | null = null;
    let unlisten: () => void;
    try {
      unlisten = await this.backend.listen(key, (o) => {
        if (o) {
          outcome = o;
          // A value for all: what the loop below answers once it resumes (fromOutcome), given now.
          if (early !== undefined && o.kind === 'value' && o.entry.kind === EntryKind.Value) early(answer<T>(o.entry, 'coalesced'));
        }
        wakeup.wake();
      });
    } catch {
      return this.runLocal(key, loader, opts, true);
    }
    try {
      for (;;) {
        const announced = outcome as Outcome | null;
        outcome = null;
        if (announced) {
          if (debug.enabled) debug('wake key=%s after %d ms: the leader announced %s', key, Math.round(monotonicNow() - waitStart), announced.kind);
          const result = announced.kind === 'shared' ? await this.readShared(key, loader, opts) : this.fromOutcome<T>(key, announced);
          if (result !== RETRY) return await result;
        }
        // Subscribed: look again, so an announcement made before the subscription is not missed.
        const token = this.nextToken();
        let lookup;
        try {
          lookup = await this.backend.lookup(key, token, opts.lockTtl, forcedSince ?? false);
        } catch (error) {
          this.backend.keyFault(key, error);
          return this.runLocal(key, loader, opts, true);
        }
        if (lookup.kind === 'corrupt') return RETRY;
        if (lookup.kind === 'hit') return this.hitFrom(key, lookup.entry, 'coalesced');
        if (lookup.kind === 'stale') {
          if (lookup.lead) return await this.lead(key, token, loader, opts, lookup.entry);
          if (withinRevalidate(lookup.entry, this.backend.now(), opts.freshness) || lookup.hold) return RETRY;
        }
        if (lookup.kind === 'wait' && lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
        if (lookup.kind === 'lead') {
          this.events.emit('miss', { key });
          if (debug.enabled) debug('takeover key=%s after %d ms: the leader\'s lock ran out, this process leads', key, Math.round(monotonicNow() - waitStart));
          return await this.lead(key, token, loader, opts, undefined, early);
        }
        const left = deadline - monotonicNow();
        if (left <= 0) return await this.waitTimedOut(key, loader, opts);
        // Woken by the announcement, or when the leader's lock runs out (leader gone).
        // No caller's signal here: the flight is shared; each caller's own signal is applied in resolve().
        const remaining = lookup.kind === 'wait' || lookup.kind === 'stale' ? lookup.remaining : -1;
        await wakeup.sleep(Math.min(left, remaining >= 0 ? remaining + 1 : opts.lockTtl));
      }
    } finally {
      unlisten();
    }
  }

  /** A value shared but too big for the message: one GET of the copy the leader left for the waiters. */
  private async readShared<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T> | typeof RETRY> {
    let found;
    try {
      found = await this.backend.getShared(key);
    } catch (error) {
      if (!this.backend.keyFault(key, error)) return this.runLocal(key, loader, opts, true);
      return RETRY;
    }
    if (found === undefined) return RETRY;
    if ('corrupt' in found) {
      this.events.emit('corrupt', { key, error: found.corrupt });
      return RETRY;
    }
    return answer(found, 'coalesced');
  }

  private fromOutcome<T>(key: string, outcome: Outcome): Promise<Settled<T>> | typeof RETRY {
    switch (outcome.kind) {
      case 'value':
        return Promise.resolve(outcome.stored ? this.hitFrom<T>(key, outcome.entry, 'coalesced') : answer<T>(outcome.entry, 'coalesced'));
      case 'error': {
        const cause = new Error(outcome.message);
        cause.name = outcome.name;
        const error = new LoaderError(`the loader for "${key}" failed in another process: ${outcome.message}`, { key, cause });
        remoteErrors.add(error);
        return Promise.reject(error);
      }
      case 'uncacheable':
        return Promise.resolve(MARKER as Settled<T>);
      case 'corrupt':
        this.events.emit('corrupt', { key, error: outcome.error });
        return RETRY;
      default:
        return RETRY;
    }
  }

  /** Redis unusable: run the loader here (single-flight still applies); keep the value in L1 only. */
  private async runLocal<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<Settled<T>> {
    if (debug.enabled && degraded) debug('degraded key=%s: Redis unusable, the loader runs in this process', key);
    // With staleIfError, a value this process kept (L1) is served rather than loading without Redis.
    const kept = this.backend.backend.peekStale(key);
    if (kept?.kind === EntryKind.Value && (kept.staleIfError ?? opts.freshness.staleIfError) > 0) {
      const now = this.backend.now();
      if (isFresh(kept, now) && now < kept.createdAt + kept.ttl) return { ...answer<T>(kept, 'hit'), degraded };
      if (withinStaleIfError(kept, now, opts.freshness)) {
        return this.failSafe(key, kept, new BackendError(`Redis is unusable; serving the stale value of "${key}"`, { key }), degraded);
      }
    }
    const started = monotonicNow();
    const { value, declared } = await this.runLoader(key, loader, degraded);
    const createdAt = this.backend.now();
    const decided = decide(value, opts, declared);
    const { decision } = decided;
    if (decision === 'store') this.hints.remember(key, valueEntry(value, createdAt, decided, opts, monotonicNow() - started));
    return { value, status: 'miss', createdAt, degraded, private: decision === 'private' };
  }

  private async runLoader<T>(key: string, loader: Loader<T>, degraded = false): Promise<{ value: T; declared: Declared }> {
    const { context, declared } = loaderContext(key, new AbortController().signal);
    try {
      return { value: await traceLoader(key, false, degraded, () => loader(context)), declared };
    } catch (error) {
      if (!(error instanceof AbandonedLoad)) this.events.emit('loaderError', { key, error });
      throw error;
    }
  }

  /** Store-and-release; a Redis failure here is reported, not thrown (undefined). A value that cannot be encoded rejects (`SerializationError`). */
  private async commit(key: string, token: string, commit: Commit): Promise<boolean | undefined> {
    try {
      return await this.backend.commit(key, token, commit);
    } catch (error) {
      if (error instanceof SerializationError) throw error;
      this.backend.keyFault(key, error);
      return undefined;
    }
  }

  private nextToken(): string {
    this.tokenCounter = (this.tokenCounter + 1) % Number.MAX_SAFE_INTEGER;
    return `${PROCESS_TOKEN}${this.tokenCounter.toString(36)}`;
  }
}

/** A refresh of a stored value running in this process. */
interface Refresh {
  settled: Promise<Settled<unknown>>;
  /** The stale value being refreshed. */
  entry: StoredEntry;
  /** Monotonic ms from which the key's channel reached this process (shared store). */
  liveAt: number | undefined;
  /** A lookup sent once the channel was live found `entry` still stored. */
  confirmed: boolean;
  /** The key's channel is followed (from the first call that asked for the stale value from memory). */
  following: boolean;
  /** The key was written, deleted or announced since: `entry` is no answer from memory. */
  superseded: boolean;
  unlisten: (() => void) | undefined;
  ended: boolean;
}

/** A stored value as the answer of a flight. */
function answer<T>(entry: StoredEntry, status: 'hit' | 'coalesced'): Settled<T> {
  return { value: entry.value as T, status, createdAt: entry.createdAt, degraded: false, private: false };
}
