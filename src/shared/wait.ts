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

/**
 * `promise`, bounded: rejects with `onTimeout()` once `ms` have passed (a timer: the monotonic
 * clock), or with the signal's reason when it aborts, whichever comes first. A value that
 * arrives after the wait gave up is handed to `late`, to be released. The timer and the
 * listener are removed when it settles.
 */
export function bounded<T>(promise: Promise<T>, ms: number, signal: AbortSignal | undefined, onTimeout: () => unknown, late: (value: T) => void, key?: string): Promise<T> {
  if (signal?.aborted) {
    promise.then(late, () => {});
    return Promise.reject(abortReason(signal, key));
  }
  return new Promise<T>((resolve, reject) => {
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
    const timer = setTimeout(() => {
      finish();
      reject(onTimeout());
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        if (done) return late(value);
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
