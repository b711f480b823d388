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

export function abortReason(signal: AbortSignal, key?: string): unknown {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name !== 'AbortError') return reason;
  return new AbortedError(key === undefined ? 'the wait was aborted' : `the wait for "${key}" was aborted`, { key, cause: reason });
}
