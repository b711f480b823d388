import { AbortedError } from './errors.js';

/**
 * A wake-up flag a waiter can sleep on: `wake()` may come before `sleep()` is called and is
 * not lost. `sleep(ms, signal)` resolves `true` when woken, `false` when `ms` passed, and
 * rejects with the signal's reason (or `AbortedError`) on abort. Every timer and listener is
 * removed when it settles.
 */
export class Wakeup {
  private pending = false;
  private resolve: ((woken: boolean) => void) | undefined;

  wake(): void {
    if (this.resolve) {
      const r = this.resolve;
      this.resolve = undefined;
      r(true);
    } else {
      this.pending = true;
    }
  }

  sleep(ms: number, signal?: AbortSignal, key?: string): Promise<boolean> {
    if (signal?.aborted) return Promise.reject(abortReason(signal, key));
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => finish(false), Math.max(0, ms));
      const onAbort = () => {
        cleanup();
        reject(abortReason(signal!, key));
      };
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.resolve = undefined;
      };
      const finish = (woken: boolean) => {
        cleanup();
        resolve(woken);
      };
      this.resolve = finish;
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** How `bounded()` bounds a wait. */
export interface Bounds<T, U> {
  /** Gives up after this many ms (a timer: the monotonic clock); no bound when undefined. */
  ms?: number;
  /** What the wait settles with once `ms` have passed: its return value, or what it throws. */
  onTimeout?: () => U;
  /** Gives up with the signal's reason when it aborts. */
  signal?: AbortSignal;
  /** Named in the error of an abort. */
  key?: string;
  /** Handed a value that arrives after the wait gave up, to be released. */
  late?: (value: T) => void;
}

/**
 * `promise`, or what `onTimeout()` gives once `ms` have passed, or the signal's reason as soon
 * as it aborts, whichever comes first. The timer and the listener are removed when it settles;
 * the promise goes on (a value it brings too late goes to `late`).
 */
export function bounded<T, U = never>(promise: Promise<T>, bounds: Bounds<T, U>): Promise<T | U> {
  const { ms, onTimeout, signal, key, late } = bounds;
  if (signal?.aborted) {
    promise.then(late, () => {});
    return Promise.reject(abortReason(signal, key));
  }
  return new Promise<T | U>((resolve, reject) => {
    let done = false;
    const finish = () => {
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      finish();
      reject(abortReason(signal!, key));
    };
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(() => {
            finish();
            try {
              resolve(onTimeout!());
            } catch (error) {
              reject(error);
            }
          }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        if (done) return late?.(value);
        finish();
        resolve(value);
      },
      (error: unknown) => {
        if (done) return;
        finish();
        reject(error);
      },
    );
  });
}

export function abortReason(signal: AbortSignal, key?: string): unknown {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name !== 'AbortError') return reason;
  return new AbortedError(key === undefined ? 'the wait was aborted' : `the wait for "${key}" was aborted`, { key, cause: reason });
}
