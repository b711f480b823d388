import { abortReason } from '../shared/wait.js';
import type { CallOptions } from './call-options.js';
import { rejoinIfAbandoned, TIMED_OUT, type Settled } from './settled.js';

/** What a failed plain read hands its joiners: each goes the full way. */
export const READ_FAILED: unique symbol = Symbol('read failed');

/**
 * Single-flight within the process: one flight per key, joined by every concurrent caller of
 * that key; and one plain read per key at a time for the fast path.
 */
export class Flights {
  private readonly inflight = new Map<string, Promise<Settled<unknown>>>();
  /**
   * Plain reads of values believed fresh, one per key, joined by the key's other readers while
   * it is in flight: the callbacks of those who joined (null until one does).
   */
  private readonly reads = new Map<string, ((found: unknown) => void)[] | null>();

  has(key: string): boolean {
    return this.inflight.has(key);
  }

  get<T>(key: string): Promise<Settled<T>> | undefined {
    return this.inflight.get(key) as Promise<Settled<T>> | undefined;
  }

  /** Makes `flight` the key's flight until it settles; callers joining it see an abandoned loader as ABANDONED (and look again), not as its error. */
  start<T>(key: string, flight: Promise<Settled<T>>): void {
    const joined = flight.catch(rejoinIfAbandoned) as Promise<Settled<unknown>>;
    this.inflight.set(key, joined);
    const cleanup = () => {
      if (this.inflight.get(key) === joined) this.inflight.delete(key);
    };
    joined.then(cleanup, cleanup);
  }

  /**
   * Joins the key's plain read if one is in flight: resolves what it finds (`READ_FAILED` when
   * it fails); else returns undefined and the caller reads for everyone (`startRead`).
   */
  joinRead(key: string): Promise<unknown> | undefined {
    const joined = this.reads.get(key);
    if (joined === undefined) return undefined;
    return new Promise((resolve) => {
      if (joined === null) this.reads.set(key, [resolve]);
      else joined.push(resolve);
    });
  }

  /** Makes the caller's read the key's plain read, joined by the key's readers until `endRead`. */
  startRead(key: string): void {
    this.reads.set(key, null);
  }

  /** Ends the key's plain read with what it found (or `READ_FAILED`): its joiners get it. */
  endRead(key: string, found: unknown): void {
    const joined = this.reads.get(key);
    this.reads.delete(key);
    if (joined) for (const resolve of joined) resolve(found);
  }

  /**
   * A caller joining this process's flight for the key waits at most its own `waitTimeout`
   * (then `onWaitTimeout` applies) and stops at once when its `signal` aborts; the flight
   * goes on for the others. Every timer and listener is removed when the wait ends.
   */
  join<T>(flight: Promise<Settled<T>>, key: string, opts: CallOptions<T>): Promise<Settled<T> | typeof TIMED_OUT> {
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(abortReason(signal, key));
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        done();
        reject(abortReason(signal!, key));
      };
      const timer = setTimeout(() => {
        done();
        resolve(TIMED_OUT);
      }, opts.waitTimeout);
      signal?.addEventListener('abort', onAbort, { once: true });
      flight.then(
        (v) => {
          done();
          resolve(v);
        },
        (e: unknown) => {
          done();
          reject(e);
        },
      );
    });
  }
}

/** `promise`, or the signal's reason as soon as it aborts (the listener is removed either way). */
export function withSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined, key: string): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal, key));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal, key));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
