import { monotonicNow } from '../shared/clock.js';
import { randomBytes } from 'node:crypto';
import { Renewal } from '../lock/renewal.js';
import { LoaderTimeoutError, SerializationError } from '../shared/errors.js';
import { debug } from '../shared/diagnostics.js';
import { EntryKind } from '../store/entry.js';
import type { Commit, StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import { errorMessage } from './guarded-backend.js';
import { failSafe, type ProtocolParts } from './answers.js';
import type { FreshnessRules } from './freshness.js';
import { expiresAt, withinStaleIfError } from './freshness.js';
import { runLoader, type RunResult } from './loader-run.js';
import { AbandonedLoad, RETRY, type Answered, type Shared } from './settled.js';
import type { Loader } from './types.js';
import { decide, errorCommit, errorName, valueEntry, type Decided } from './verdict.js';

const PROCESS_TOKEN = randomBytes(8).toString('hex');

/**
 * Steps 3–4 of the miss protocol: the leader runs the loader holding a renewed lock, then
 * stores, releases and announces in one commit.
 */
export class Leader {
  private tokenCounter = 0;

  constructor(private readonly parts: ProtocolParts) {}

  /** A lock token unique to this call in the fleet. */
  nextToken(): string {
    this.tokenCounter = (this.tokenCounter + 1) % Number.MAX_SAFE_INTEGER;
    return `${PROCESS_TOKEN}${this.tokenCounter.toString(36)}`;
  }

  /**
   * Run the loader holding the lead, then store, release and announce. With `fallback` (a
   * stored value being refreshed) the run is a refresh: reported by `refresh` events, and a
   * failure keeps the lock for `failSafeRetry` (no new attempt fleet-wide until then; see
   * `failed`), answered with the fallback under `staleIfError`. `hardTimeout` gives the loader up: its signal
   * aborts with `LoaderTimeoutError`, and the run has failed like any other. A failure after
   * the loader returned (its verdict, its entry, its encoding) lets go of the lock at once and
   * announces the error. `early`, if given, is called with the answer as soon as the value's
   * commit is on its way (its callers need not wait for Redis's reply: the flight's value is
   * the loader's whatever the commit's fate).
   */
  async lead<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>, fallback?: StoredEntry, early?: (settled: Shared<T>) => void): Promise<Answered<T> | typeof RETRY> {
    const { backend, events } = this.parts;
    const controller = new AbortController();
    const rules = opts.freshness;
    const renewal = backend.distributed
      ? new Renewal({
          ttl: opts.lockTtl,
          key,
          extend: () => backend.renew(key, token, opts.lockTtl),
          onLost: (error) => {
            events.emit('lockLost', { key, error });
            controller.abort(error);
          },
        }).start()
      : undefined;
    const started = monotonicNow();
    const refreshEnd = (outcome: 'stored' | 'error' | 'timeout' | 'lost') => {
      if (!fallback) return;
      const duration = monotonicNow() - started;
      if (debug.enabled) debug('refresh key=%s ended after %d ms: %s', key, Math.round(duration), outcome);
      events.emit('refresh', { key, phase: 'end', duration, outcome });
    };
    if (fallback) {
      if (debug.enabled) debug('refresh key=%s started', key);
      events.emit('refresh', { key, phase: 'start' });
    }
    let run: RunResult<T>;
    try {
      run = await runLoader(key, loader, { hardTimeout: rules.hardTimeout, background: opts.background === true, degraded: false, stale: fallback, controller }, events);
    } catch (error) {
      await renewal?.stop();
      // Given up (hardTimeout): a failed run like any other (the callers get the stale value or
      // this error, and a refresh holds the lead for failSafeRetry).
      if (error instanceof LoaderTimeoutError) return this.failed(key, token, error, rules, fallback, () => refreshEnd('timeout'));
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
      return this.failed(key, token, error, rules, fallback, () => refreshEnd('error'));
    }
    await renewal?.stop();
    const { value, declared, delta } = run;
    if (debug.enabled) debug('loaded key=%s in %d ms', key, Math.round(delta));

    const createdAt = backend.now();
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
        const sent = early === undefined ? undefined : () => early({ kind: 'shared', value, status: 'miss', createdAt, degraded: false });
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
      return { kind: 'own', value, status: 'miss', createdAt, degraded: false };
    }
    if (committed && decision === 'store') this.parts.hints.remember(key, entry!);
    refreshEnd(committed === false ? 'lost' : 'stored');
    return { kind: 'shared', value, status: 'miss', createdAt, degraded: committed === undefined };
  }

  /** Store-and-release; a Redis failure here is reported, not thrown (undefined). A value that cannot be encoded rejects (`SerializationError`). */
  async commit(key: string, token: string, commit: Commit): Promise<boolean | undefined> {
    try {
      return await this.parts.backend.commit(key, token, commit);
    } catch (error) {
      if (error instanceof SerializationError) throw error;
      this.parts.backend.keyFault(key, error);
      return undefined;
    }
  }

  /**
   * A run that failed (the loader threw, or `hardTimeout` gave it up). The error is announced
   * (every waiter gets it; nothing is cached). A refresh of a stored value keeps the lead as a
   * hold (see `failSafeHold`): no process starts another run of the key before it ends, and
   * the callers inside a stale window are answered with the stored value meanwhile. Under
   * `staleIfError` that value is this run's answer too; else the error is thrown. A miss with
   * no stored value lets go of the lead at once. `ended` runs once the lead is settled.
   */
  private async failed<T>(key: string, token: string, error: unknown, rules: FreshnessRules, fallback: StoredEntry | undefined, ended: () => void): Promise<Answered<T>> {
    const now = this.parts.backend.now();
    const holdMs = fallback === undefined ? 0 : failSafeHold(fallback, now, rules);
    await this.commit(key, token, holdMs > 0 ? { mode: 'fail', name: errorName(error), message: errorMessage(error), holdMs } : errorCommit(error));
    ended();
    if (fallback && withinStaleIfError(fallback, now, rules)) return failSafe(this.parts, key, fallback, error, false);
    throw error;
  }
}

/**
 * How long a failed refresh of `entry` holds the key's lead (ms; 0: no hold), whether or not
 * `staleIfError` serves the stored value instead of the error: `failSafeRetry`, but never past
 * the end of the entry's stale window (then no value is left to serve, and the next call is a
 * plain miss, which is never held).
 */
function failSafeHold(entry: StoredEntry, now: number, rules: FreshnessRules): number {
  return Math.max(0, Math.min(rules.failSafeRetry, expiresAt(entry) + (entry.stale ?? 0) - now));
}
