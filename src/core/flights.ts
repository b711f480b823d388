import { bounded } from '../shared/wait.js';
import type { CallOptions } from './call-options.js';
import { rejoinIfAbandoned, TIMED_OUT, type Settled } from './settled.js';

/**
 * Single-flight within the process: one flight per key, joined by every concurrent caller of
 * that key; and one shared plain read per key for the fast path.
 */
export class Flights {
  private readonly inflight = new Map<string, Promise<Settled<unknown>>>();
  /** Plain reads of values believed fresh, shared by concurrent readers of a key. */
  private readonly reads = new Map<string, Promise<unknown>>();

  has(key: string): boolean {
    return this.inflight.has(key);
  }

  get<T>(key: string): Promise<Settled<T>> | undefined {
    return this.inflight.get(key) as Promise<Settled<T>> | undefined;
  }

  /**
   * Makes `flight` the key's flight until it settles; callers joining it see an abandoned
   * loader as ABANDONED (and look again), not as its error. Returns the promise they join.
   */
  start<T>(key: string, flight: Promise<Settled<T>>): Promise<Settled<unknown>> {
    const joined = flight.catch(rejoinIfAbandoned) as Promise<Settled<unknown>>;
    this.inflight.set(key, joined);
    const cleanup = () => {
      if (this.inflight.get(key) === joined) this.inflight.delete(key);
    };
    joined.then(cleanup, cleanup);
    return joined;
  }

  /**
   * The key was written: callers from now on do not join a flight or a read started before
   * (its answer may be older than the write); those already joined keep it.
   */
  detach(key: string): void {
    this.inflight.delete(key);
    this.reads.delete(key);
  }

  /** The key's shared read, started with `read()` if there is none; forgotten once it settles. */
  sharedRead<R>(key: string, read: () => Promise<R>): Promise<R> {
    let shared = this.reads.get(key) as Promise<R> | undefined;
    if (shared === undefined) {
      shared = read();
      this.reads.set(key, shared);
      const current = shared;
      const forget = () => {
        if (this.reads.get(key) === current) this.reads.delete(key);
      };
      current.then(forget, forget);
    }
    return shared;
  }

  /**
   * A caller joining this process's flight for the key waits at most its own `waitTimeout`
   * (then `onWaitTimeout` applies) and stops at once when its `signal` aborts; the flight
   * goes on for the others. Every timer and listener is removed when the wait ends.
   */
  join<T>(flight: Promise<Settled<T>>, key: string, opts: CallOptions<T>): Promise<Settled<T> | typeof TIMED_OUT> {
    return bounded(flight, { ms: opts.waitTimeout, onTimeout: () => TIMED_OUT, signal: opts.signal, key });
  }
}

/** `promise`, or the signal's reason as soon as it aborts (the listener is removed either way). */
export function withSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined, key: string): Promise<T> {
  return signal ? bounded(promise, { signal, key }) : promise;
}
