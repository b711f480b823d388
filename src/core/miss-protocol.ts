import { monotonicNow } from '../shared/clock.js';
import { LoaderError, RemoteLoaderError, WaitTimeoutError } from '../shared/errors.js';
import { debug } from '../shared/diagnostics.js';
import { Wakeup } from '../shared/wait.js';
import { EntryKind } from '../store/entry.js';
import type { Lookup, Outcome, StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import { coalesced, type CacheEmitter } from './events.js';
import type { GuardedBackend } from './guarded-backend.js';
import type { FreshnessHints } from './hints.js';
import { isFresh, withinRevalidate, withinStaleIfError } from './freshness.js';
import { answer, failSafe, softly, staleAnswer, type ProtocolParts } from './answers.js';
import { Leader } from './lead.js';
import { LocalRun } from './local-run.js';
import { Refreshes } from './refresh.js';
import { MARKER, RETRY, type Answered, type Marker, type Shared } from './settled.js';

/** How a flight of this process ends: a value (for all, or for its own caller), or a marker that sends every caller to its own loader. */
export type Flown<T> = Answered<T> | Marker;
import type { Loader } from './types.js';
import { RefreshingElsewhere } from './refreshing-elsewhere.js';

/**
 * The protocol on a miss (see "The protocol on a miss" in docs/design.md): look up or lead in one
 * round trip; the leader runs the loader holding a renewed lock, then stores, releases and
 * announces (commit, lead.ts); waiters listen for the announcement and take over when the
 * lock runs out (here). Stale values and their refreshes are refresh.ts's; the runs that take
 * no lead, local-run.ts's. Every way of ending is a `Settled` for the callers of this
 * process's flight.
 */
export class MissProtocol {
  private readonly parts: ProtocolParts;
  private readonly leader: Leader;
  /** Stale values refreshed by this process (early refresh on a hit, the stale value while a refresh runs, a write superseding one). */
  readonly refreshes: Refreshes;
  /** The runs that take no lead (a pass, a timed-out wait, a run after another process's loader failed, Redis unusable). */
  readonly local: LocalRun;
  /** Stale values whose refresh another process runs: answered without asking Redis again. */
  private readonly elsewhere: RefreshingElsewhere;

  constructor(
    private readonly backend: GuardedBackend,
    private readonly hints: FreshnessHints,
    private readonly events: CacheEmitter,
  ) {
    this.parts = { backend, hints, events };
    this.leader = new Leader(this.parts);
    this.refreshes = new Refreshes(this.parts, this.leader);
    this.local = new LocalRun(this.parts);
    this.elsewhere = new RefreshingElsewhere(backend);
  }

  /** Stops following the channels of keys refreshed elsewhere, and of refreshes running here. */
  close(): void {
    this.elsewhere.clear();
    this.refreshes.close();
  }

  /**
   * The flight of `key` for the callers of this process. `early`, if given, is called with the
   * answer as soon as another process's announcement of a value is heard, before the waiting
   * step's own bookkeeping (freshness hint, unsubscribing) and the promise hops back to the
   * flight: the callers joined to the flight can be answered from the listener itself.
   * `unhinted`: the caller found no freshness hint of the key in this same turn.
   */
  async fly<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, early?: (settled: Shared<T>) => void, unhinted = false): Promise<Flown<T>> {
    const deadline = monotonicNow() + opts.waitTimeout;
    // A forced refresh looks past the values stored before it began: it leads, or waits for
    // the run in flight and takes the value that run stores.
    const forcedSince = opts.forceRefresh ? this.backend.now() : undefined;
    let skipValue: boolean | number = forcedSince ?? false;
    for (;;) {
      // A refresh of the key runs here or in another process: its stale value is the answer
      // (only while the key's channel is live and Redis usable: see GuardedBackend.live).
      const refreshing = opts.forceRefresh ? undefined : this.refreshes.staleWhileRefreshing<T>(key, opts);
      if (refreshing) return refreshing;
      const elsewhere = opts.forceRefresh ? undefined : this.elsewhere.get(key);
      if (elsewhere !== undefined && withinRevalidate(elsewhere, this.backend.now(), opts.freshness)) return staleAnswer(this.parts, key, elsewhere, 'revalidate');
      // (`unhinted`: the caller found no hint in this same turn; the loop's later turns ask.)
      const hinted = !skipValue && !unhinted && this.hints.believedFresh(key);
      unhinted = false;
      if (hinted) {
        // This process saw the value and it has not expired: read it with a plain GET. Only a
        // key that is unknown here or expired goes to the lookup-or-lead script, so a miss
        // still costs one round trip and a hit costs what a GET costs.
        if (!this.backend.usable(key)) return this.local.degraded(key, loader, opts);
        let found;
        try {
          found = await this.backend.get(key);
        } catch (error) {
          if (!this.backend.keyFault(key, error)) return this.local.degraded(key, loader, opts);
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
      const tryLead = !this.refreshes.has(key);
      if (!this.backend.usable(key)) return this.local.degraded(key, loader, opts);
      const token = this.leader.nextToken();
      const sentAt = monotonicNow();
      let lookup;
      try {
        lookup = await this.backend.lookup({ key, token, lockTtl: opts.lockTtl, skip: skipValue ? 'any' : undefined, tryLead });
      } catch (error) {
        // A fault of this key: look again past its value; if even that fails, run without Redis
        // for this call only.
        if (!this.backend.keyFault(key, error) || skipValue) return this.local.degraded(key, loader, opts);
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
          const led = await this.leader.lead(key, token, loader, opts, undefined, early);
          if (led === RETRY) continue;
          return led;
        }
        case 'wait': {
          this.elsewhere.forget(key);
          if (lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
          coalesced(this.events, key, true, opts.onJoin);
          if (debug.enabled) debug('wait key=%s: another process leads, its lock expires in %d ms', key, lookup.remaining);
          const waited = await this.waitRemote(key, loader, opts, deadline, early, forcedSince);
          if (waited === RETRY) continue;
          return waited;
        }
      }
    }
  }

  /**
   * An entry found in the store, as the answer: a hit-for-miss marker sends every caller to
   * its own loader; a value is remembered (freshness hint, L1) and answered as `status`.
   */
  private hitFrom<T>(key: string, entry: StoredEntry, status: 'hit' | 'coalesced', loader?: Loader<T>, opts?: CallOptions<T>): Shared<T> | Marker {
    if (entry.kind === EntryKind.HitForMiss) return MARKER;
    if (status === 'hit' && this.events.listenerCount('hit') > 0) this.events.emit('hit', { key, layer: 'store' });
    this.hints.remember(key, entry);
    if (loader && opts) this.refreshes.afterHit(key, entry, loader, opts);
    return answer(entry, status);
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
  ): Promise<Flown<T>> {
    const { entry } = lookup;
    if (entry.kind !== EntryKind.Value) return MARKER;
    this.hints.remember(key, entry);
    const now = this.backend.now();
    const rules = opts.freshness;
    if (withinRevalidate(entry, now, rules)) {
      if (lookup.lead && opts.inlineRefresh) {
        if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
        const inline = this.refreshes.track(key, entry, this.leader.lead(key, token, loader, opts, entry));
        inline.catch(() => {
          /* the caller that leads gets the error */
        });
        return { ...staleAnswer<T>(this.parts, key, entry, 'revalidate'), inline };
      }
      if (lookup.lead) this.refreshes.inBackground(key, token, loader, opts, entry);
      // Refreshed by another process: later flights here answer this value until it is over.
      else if (!lookup.hold && !this.refreshes.has(key)) this.elsewhere.heard(key, entry, lookup.remaining, sentAt);
      else this.refreshes.confirm(key, entry, sentAt);
      // While a failed refresh holds the lock (failSafeRetry), the stale value is served because of that error.
      return staleAnswer(this.parts, key, entry, lookup.hold ? 'error' : 'revalidate');
    }
    if (lookup.lead) {
      if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
      const refresh = this.refreshes.track(key, entry, this.leader.lead(key, token, loader, opts, entry));
      return softly(this.parts, key, refresh, entry, rules.softTimeout);
    }
    if (lookup.hold && withinStaleIfError(entry, now, rules)) {
      // A refresh failed moments ago: no new attempt before failSafeRetry, fleet-wide.
      return failSafe(this.parts, key, entry, new LoaderError(`the last refresh of "${key}" failed; retrying after failSafeRetry`, { key }), false);
    }
    coalesced(this.events, key, true, opts.onJoin);
    const running = this.refreshes.settled<T>(key);
    const waited: Promise<Flown<T>> = running
      ? running.then((settled) => (settled.status === 'stale' ? settled : { ...settled, status: 'coalesced' }))
      : this.waitRemote(key, loader, opts, deadline).then((w) => (w === RETRY ? this.fly(key, loader, opts) : w));
    const guarded = waited.catch((error: unknown) => {
      if (error instanceof WaitTimeoutError || !withinStaleIfError(entry, this.backend.now(), rules)) throw error;
      return failSafe<T>(this.parts, key, entry, error, false);
    });
    return softly(this.parts, key, guarded, entry, rules.softTimeout);
  }

  /** Step 5: wait for the leader's announcement; take over when its lock runs out. */
  private async waitRemote<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, deadline: number, early?: (settled: Shared<T>) => void, forcedSince?: number): Promise<Flown<T> | typeof RETRY> {
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
      return this.local.degraded(key, loader, opts);
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
        const token = this.leader.nextToken();
        let lookup;
        try {
          lookup = await this.backend.lookup({ key, token, lockTtl: opts.lockTtl, skip: forcedSince === undefined ? undefined : { createdUpTo: forcedSince } });
        } catch (error) {
          this.backend.keyFault(key, error);
          return this.local.degraded(key, loader, opts);
        }
        if (lookup.kind === 'corrupt') return RETRY;
        if (lookup.kind === 'hit') return this.hitFrom(key, lookup.entry, 'coalesced');
        if (lookup.kind === 'stale') {
          if (lookup.lead) return await this.leader.lead(key, token, loader, opts, lookup.entry);
          // Servable at once (inside staleWhileRevalidate, or while a failed refresh holds the
          // lead, under staleIfError): the next turn answers it. Else wait like for a leader:
          // a hold ends in failSafeRetry, and this caller may lead then.
          const now = this.backend.now();
          if (withinRevalidate(lookup.entry, now, opts.freshness) || (lookup.hold && withinStaleIfError(lookup.entry, now, opts.freshness))) return RETRY;
        }
        if (lookup.kind === 'wait' && lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
        if (lookup.kind === 'lead') {
          this.events.emit('miss', { key });
          if (debug.enabled) debug('takeover key=%s after %d ms: the leader\'s lock ran out, this process leads', key, Math.round(monotonicNow() - waitStart));
          return await this.leader.lead(key, token, loader, opts, undefined, early);
        }
        const left = deadline - monotonicNow();
        if (left <= 0) return await this.local.waitTimedOut(key, loader, opts);
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
  private async readShared<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Answered<T> | typeof RETRY> {
    let found;
    try {
      found = await this.backend.getShared(key);
    } catch (error) {
      if (!this.backend.keyFault(key, error)) return this.local.degraded(key, loader, opts);
      return RETRY;
    }
    if (found === undefined) return RETRY;
    if ('corrupt' in found) {
      this.events.emit('corrupt', { key, error: found.corrupt });
      return RETRY;
    }
    return answer(found, 'coalesced');
  }

  private fromOutcome<T>(key: string, outcome: Outcome): Promise<Shared<T> | Marker> | typeof RETRY {
    switch (outcome.kind) {
      case 'value':
        return Promise.resolve(outcome.stored ? this.hitFrom<T>(key, outcome.entry, 'coalesced') : answer<T>(outcome.entry, 'coalesced'));
      case 'error':
        return Promise.reject(new RemoteLoaderError(`the loader for "${key}" failed in another process: ${outcome.message}`, outcome, { key }));
      case 'uncacheable':
        return Promise.resolve<Marker>(MARKER);
      case 'corrupt':
        this.events.emit('corrupt', { key, error: outcome.error });
        return RETRY;
      default:
        return RETRY;
    }
  }
}
