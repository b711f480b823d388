import { monotonicNow } from '../shared/clock.js';
import { LoaderTimeoutError } from '../shared/errors.js';
import { traceLoader } from '../shared/diagnostics.js';
import type { StoredEntry } from '../store/types.js';
import type { CacheEmitter } from './events.js';
import { AbandonedLoad } from './settled.js';
import type { Loader } from './types.js';
import { loaderContext, type Declared } from './verdict.js';

/** How one loader run goes: every path that runs a loader (lead, refresh, the local runs) runs it here. */
interface RunSpec {
  /** Gives the loader up after this many ms (0: never): its signal aborts with `LoaderTimeoutError`, and the run rejects with it. */
  hardTimeout: number;
  /** A refresh no caller waits for (traced as such). */
  background: boolean;
  /** Running without the shared store (traced as such). */
  degraded: boolean;
  /** The stored value being refreshed, handed to the loader as `ctx.stale`. */
  stale?: StoredEntry | undefined;
  /**
   * The run's controller, when its owner aborts it for a reason of its own (a lead lock lost):
   * a run that rejects with that reason is not reported as the loader's error.
   */
  controller?: AbortController;
}

/** A loader's result, what it declared of it through its context, and how long it ran (ms). */
export interface RunResult<T> {
  value: T;
  declared: Declared;
  delta: number;
}

/**
 * Runs `loader` once with a real signal: aborted by `hardTimeout` (`LoaderTimeoutError`, which
 * the run then rejects with) or by its owner. A failure is reported as `loaderError`, except an
 * `AbandonedLoad` (nothing to report) and the owner's own abort reason.
 */
export async function runLoader<T>(key: string, loader: Loader<T>, spec: RunSpec, events: CacheEmitter): Promise<RunResult<T>> {
  const controller = spec.controller ?? new AbortController();
  const started = monotonicNow();
  let timer: NodeJS.Timeout | undefined;
  try {
    const stale = spec.stale === undefined ? undefined : { value: spec.stale.value, createdAt: spec.stale.createdAt };
    const { context, declared } = loaderContext(key, controller.signal, stale);
    const run = Promise.resolve().then(() => traceLoader(key, spec.background, spec.degraded, () => loader(context)));
    const value = await (spec.hardTimeout > 0
      ? Promise.race([
          run,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              const error = new LoaderTimeoutError(`the loader for "${key}" did not settle within ${spec.hardTimeout} ms (hardTimeout)`, { key });
              controller.abort(error);
              reject(error);
            }, spec.hardTimeout);
          }),
        ])
      : run);
    return { value, declared, delta: monotonicNow() - started };
  } catch (error) {
    const ownAbort = !(error instanceof LoaderTimeoutError) && controller.signal.aborted && error === controller.signal.reason;
    if (!ownAbort && !(error instanceof AbandonedLoad)) events.emit('loaderError', { key, error });
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
