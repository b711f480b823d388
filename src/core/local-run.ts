import { monotonicNow } from '../shared/clock.js';
import { BackendError, SerializationError, WaitTimeoutError } from '../shared/errors.js';
import { debug } from '../shared/diagnostics.js';
import { EntryKind } from '../store/entry.js';
import type { CallOptions } from './call-options.js';
import { answer, failSafe, type ProtocolParts } from './answers.js';
import { isFresh, withinStaleIfError } from './freshness.js';
import { runLoader, type RunResult } from './loader-run.js';
import { ran, type Answered } from './settled.js';
import type { Loader } from './types.js';
import { decide, valueEntry } from './verdict.js';

/**
 * The loader runs of this process that take no lead: a caller's own run (`pass`: a private
 * result, a hit-for-miss marker, a wait that timed out with `onWaitTimeout: 'load'`), the run
 * after a remote loader error (`onRemoteError: 'load'`), and the degraded run while the store
 * is unusable. Each runs through the one loader runner: a real signal, `hardTimeout`, the
 * same diagnostics as a lead.
 */
export class LocalRun {
  constructor(private readonly parts: ProtocolParts) {}

  /** Runs this caller's own loader without coordination; stores the result if it is cacheable. */
  async pass<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Answered<T>> {
    const { backend, hints } = this.parts;
    const { value, declared, delta } = await this.run(key, loader, opts, false);
    const createdAt = backend.now();
    const decided = decide(value, opts, declared);
    const { decision } = decided;
    let degraded = false;
    if (decision === 'store') {
      const entry = valueEntry(value, createdAt, decided, opts, delta);
      try {
        // A loader's value, stored beside a lead that may be running (not a write that supersedes it).
        await backend.set(key, entry, false);
        hints.remember(key, entry);
      } catch (error) {
        if (error instanceof SerializationError) throw error;
        degraded = true;
      }
    }
    return ran(value, 'pass', createdAt, degraded, decision === 'private');
  }

  /**
   * The loader failed in another process and this caller asked for `onRemoteError: 'load'`:
   * it runs its own loader, once for the callers of this process that do the same (the
   * flight), without coordination and without storing the result.
   */
  async afterRemoteError<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Answered<T>> {
    const { value, declared } = await this.run(key, loader, opts, false);
    return ran(value, 'miss', this.parts.backend.now(), false, decide(value, opts, declared).decision === 'private');
  }

  /** A caller's `waitTimeout` passed: `WaitTimeoutError`, or its own run with `onWaitTimeout: 'load'`. */
  async waitTimedOut<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Answered<T>> {
    this.parts.events.emit('waitTimeout', { key, waited: opts.waitTimeout });
    if (opts.onWaitTimeout === 'load') return this.pass(key, loader, opts);
    throw new WaitTimeoutError(
      `waited ${opts.waitTimeout} ms for another caller to compute "${key}"; raise waitTimeout, or set onWaitTimeout: 'load' to run the loader instead`,
      { key },
    );
  }

  /** Redis unusable: run the loader here (single-flight still applies); keep the value in L1 only. */
  async degraded<T>(key: string, loader: Loader<T>, opts: CallOptions<T>): Promise<Answered<T>> {
    const { backend, hints } = this.parts;
    if (debug.enabled) debug('degraded key=%s: Redis unusable, the loader runs in this process', key);
    // With staleIfError, a value this process kept (L1) is served rather than loading without Redis.
    const kept = backend.peekStale(key);
    if (kept?.kind === EntryKind.Value && (kept.staleIfError ?? opts.freshness.staleIfError) > 0) {
      const now = backend.now();
      if (isFresh(kept, now) && now < kept.createdAt + kept.ttl) return { ...answer<T>(kept, 'hit'), degraded: true };
      if (withinStaleIfError(kept, now, opts.freshness)) {
        return failSafe(this.parts, key, kept, new BackendError(`Redis is unusable; serving the stale value of "${key}"`, { key }), true);
      }
    }
    const started = monotonicNow();
    const { value, declared } = await this.run(key, loader, opts, true);
    const createdAt = backend.now();
    const decided = decide(value, opts, declared);
    const { decision } = decided;
    if (decision === 'store') hints.remember(key, valueEntry(value, createdAt, decided, opts, monotonicNow() - started));
    return ran(value, 'miss', createdAt, true, decision === 'private');
  }

  private run<T>(key: string, loader: Loader<T>, opts: CallOptions<T>, degraded: boolean): Promise<RunResult<T>> {
    return runLoader(key, loader, { hardTimeout: opts.freshness.hardTimeout, background: false, degraded }, this.parts.events);
  }
}
