import type { CacheStatus, StaleReason } from './types.js';

/** What a flight settles with: the answer shared by every caller of this process that joined it. */
export interface Settled<T> {
  value: T;
  status: CacheStatus;
  createdAt: number;
  degraded: boolean;
  private: boolean;
  /** With status `stale`: why. */
  staleReason?: StaleReason;
  /**
   * The caller that started the flight won the lead of a stale value with an inline refresh
   * (the HTTP adapters): it waits for this; the callers that joined its flight take the stale value.
   */
  inline?: Promise<Settled<T>>;
  /** A hit-for-miss marker or a "not cacheable" announcement: every caller runs its own loader. */
  marker?: true;
  /** The leader's loader gave up (`AbandonedLoad`): its callers look again and one of them leads. */
  abandoned?: true;
}

/** What a flight settles with when its callers should each run their own loader, at once. */
export const MARKER: Settled<undefined> = { value: undefined, status: 'pass', createdAt: 0, degraded: false, private: true, marker: true };

/** What callers joining a flight see when its loader was abandoned. */
export const ABANDONED: Settled<undefined> = { value: undefined, status: 'pass', createdAt: 0, degraded: false, private: false, abandoned: true };

/** A step of the protocol found nothing usable: look up again. */
export const RETRY = Symbol('retry');

/** A caller's own `waitTimeout` passed while it waited for this process's flight. */
export const TIMED_OUT = Symbol('timed out');

/**
 * Thrown by a loader that has no result and no error to share, because the work it stood for
 * was cut short (the HTTP adapters: the handler's response could not be captured). The lead is
 * handed back without an announcement or a hit-for-miss marker, and the callers waiting for it
 * look up again, so exactly one of them leads next. The caller whose loader threw gets it back.
 * Internal to the library.
 */
export class AbandonedLoad extends Error {
  override readonly name = 'AbandonedLoad';
}

export function rejoinIfAbandoned(error: unknown): Settled<undefined> {
  if (error instanceof AbandonedLoad) return ABANDONED;
  throw error;
}
