import { monotonicNow } from '../shared/clock.js';
import { randomBytes } from 'node:crypto';
import { Renewal } from '../lock/renewal.js';
import { InvalidOptionError, LoaderError, SerializationError, WaitTimeoutError } from '../shared/errors.js';
import { debug, traceLoader } from '../shared/diagnostics.js';
import { Wakeup } from '../shared/wait.js';
import { EntryKind } from '../store/entry.js';
import type { Commit, Outcome, StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import type { CacheEmitter } from './events.js';
import type { GuardedBackend } from './guarded-backend.js';
import { errorMessage } from './guarded-backend.js';
import type { FreshnessHints } from './hints.js';
import { AbandonedLoad, MARKER, RETRY, type Settled } from './settled.js';
import type { CacheDecision, Loader } from './types.js';

const PROCESS_TOKEN = randomBytes(8).toString('hex');

/** The `LoaderError`s that tell of a loader that failed in another process. */
const remoteErrors = new WeakSet<Error>();

/** True for the `LoaderError` of a loader that failed in another process (what `onRemoteError` is about). */
export function isRemoteLoaderError(error: unknown): boolean {
  return error instanceof Error && remoteErrors.has(error);
}

/**
 * The protocol on a miss (see "The protocol on a miss" in DESIGN.md): look up or lead in one
 * round trip; the leader runs the loader holding a renewed lock, then stores, releases and
 * announces (commit); waiters listen for the announcement and take over when the lock runs
 * out. Every way of ending is a `Settled` for the callers of this process's flight.
 */
export class MissProtocol {
  private tokenCounter = 0;

  constructor(
    private readonly backend: GuardedBackend,
    private readonly hints: FreshnessHints,
    private readonly events: CacheEmitter,
  ) {}

  async fly<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const deadline = monotonicNow() + opts.waitTimeout;
    let skipValue = false;
    for (;;) {
      if (!this.backend.usable(key)) return this.runLocal(key, loader, opts, true);
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
          return this.hitFrom(key, found, 'hit');
        }
        this.hints.forget(key);
      }
      const token = this.nextToken();
      let lookup;
      try {
        lookup = await this.backend.lookup(key, token, opts.lockTtl, skipValue);
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
          return this.hitFrom(key, lookup.entry, 'hit');
        case 'lead': {
          if (this.events.listenerCount('miss') > 0) this.events.emit('miss', { key });
          if (debug.enabled) debug('lead key=%s: no value, this process runs the loader', key);
          const led = await this.lead(key, token, loader, opts);
          if (led === RETRY) continue;
          return led;
        }
        case 'wait': {
          if (lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
          if (this.events.listenerCount('coalesced') > 0) this.events.emit('coalesced', { key, remote: true });
          if (debug.enabled) debug('wait key=%s: another process leads, its lock expires in %d ms', key, lookup.remaining);
          const waited = await this.waitRemote(key, loader, opts, deadline);
          if (waited === RETRY) continue;
          return waited;
        }
      }
    }
  }

  /** Runs this caller's own loader without coordination; stores the result if it is cacheable. */
  async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T>> {
    const value = await this.runLoader(key, loader);
    const createdAt = Date.now();
    const decision = decide(value, opts);
    let degraded = false;
    if (decision === 'store') {
      const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl };
      try {
        await this.backend.set(key, entry);
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
    const value = await this.runLoader(key, loader);
    return { value, status: 'miss', createdAt: Date.now(), degraded: false, private: decide(value, opts) === 'private' };
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
  private hitFrom<T>(key: string, entry: StoredEntry, status: 'hit' | 'coalesced'): Settled<T> {
    if (entry.kind === EntryKind.HitForMiss) return MARKER as Settled<T>;
    if (status === 'hit' && this.events.listenerCount('hit') > 0) this.events.emit('hit', { key, layer: 'store' });
    this.hints.remember(key, entry);
    return answer(entry, status);
  }

  /** Step 3–4: run the loader holding the lead, then store, release and announce. */
  private async lead<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Settled<T> | typeof RETRY> {
    const controller = new AbortController();
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
    const loadStart = debug.enabled ? monotonicNow() : 0;
    let value: T;
    try {
      value = await traceLoader(key, false, false, () => loader({ key, signal: controller.signal }));
    } catch (error) {
      await renewal?.stop();
      if (controller.signal.aborted && error === controller.signal.reason) return RETRY;
      if (error instanceof AbandonedLoad) {
        // Nothing to share and no error to announce: hand the lead back, with no marker.
        await this.commit(key, token, { mode: 'release' });
        throw error;
      }
      this.events.emit('loaderError', { key, error });
      await this.commit(key, token, errorCommit(error));
      throw error;
    }
    await renewal?.stop();
    if (debug.enabled) debug('loaded key=%s in %d ms', key, Math.round(monotonicNow() - loadStart));

    const createdAt = Date.now();
    const decision = decide(value, opts);
    if (decision === 'private') {
      const marker: StoredEntry | undefined =
        opts.hitForMissTtl > 0 ? { kind: EntryKind.HitForMiss, value: undefined, createdAt, ttl: opts.hitForMissTtl } : undefined;
      await this.commit(key, token, { mode: 'uncacheable', marker });
      return { value, status: 'miss', createdAt, degraded: false, private: true };
    }
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl };
    let committed;
    try {
      committed = await this.commit(key, token, { mode: decision, entry, sharedTtl: opts.lockTtl });
    } catch (error) {
      // The value cannot be encoded (nothing was sent): announce the error and release.
      await this.commit(key, token, errorCommit(error));
      throw error;
    }
    if (committed && decision === 'store') this.hints.remember(key, entry);
    return { value, status: 'miss', createdAt, degraded: committed === undefined, private: false };
  }

  /** Step 5: wait for the leader's announcement; take over when its lock runs out. */
  private async waitRemote<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, deadline: number): Promise<Settled<T> | typeof RETRY> {
    const wakeup = new Wakeup();
    const waitStart = debug.enabled ? monotonicNow() : 0;
    let outcome: Outcome | null = null;
    let unlisten: () => void;
    try {
      unlisten = await this.backend.listen(key, (o) => {
        if (o) outcome = o;
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
          lookup = await this.backend.lookup(key, token, opts.lockTtl, false);
        } catch (error) {
          this.backend.keyFault(key, error);
          return this.runLocal(key, loader, opts, true);
        }
        if (lookup.kind === 'corrupt') return RETRY;
        if (lookup.kind === 'hit') return this.hitFrom(key, lookup.entry, 'coalesced');
        if (lookup.kind === 'wait' && lookup.repaired) this.events.emit('corrupt', { key, error: lookup.repaired });
        if (lookup.kind === 'lead') {
          this.events.emit('miss', { key });
          if (debug.enabled) debug('takeover key=%s after %d ms: the leader\'s lock ran out, this process leads', key, Math.round(monotonicNow() - waitStart));
          return await this.lead(key, token, loader, opts);
        }
        const left = deadline - monotonicNow();
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
    const value = await this.runLoader(key, loader, degraded);
    const createdAt = Date.now();
    const decision = decide(value, opts);
    if (decision === 'store') this.hints.remember(key, { kind: EntryKind.Value, value, createdAt, ttl: opts.ttl });
    return { value, status: 'miss', createdAt, degraded, private: decision === 'private' };
  }

  private async runLoader<T>(key: string, loader: Loader<T>, degraded = false): Promise<T> {
    try {
      return await traceLoader(key, false, degraded, () => loader({ key, signal: new AbortController().signal }));
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

/** A stored value as the answer of a flight. */
function answer<T>(entry: StoredEntry, status: 'hit' | 'coalesced'): Settled<T> {
  return { value: entry.value as T, status, createdAt: entry.createdAt, degraded: false, private: false };
}

function decide<T>(value: T, opts: CallOptions<T>): CacheDecision {
  if (opts.cacheable) {
    const decision = opts.cacheable(value);
    if (decision !== 'store' && decision !== 'share' && decision !== 'private') {
      throw new InvalidOptionError('cacheable', `must return 'store', 'share' or 'private', got ${String(decision)}`);
    }
    return decision;
  }
  return value === undefined ? 'share' : 'store';
}

function errorCommit(error: unknown): Commit {
  return { mode: 'error', name: error instanceof Error ? error.name : 'Error', message: errorMessage(error) };
}
