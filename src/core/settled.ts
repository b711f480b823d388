import type { CacheStatus, StaleReason } from './types.js';

/** A value that answers every caller of the flight. */
export interface Shared<T> {
  kind: 'shared';
  value: T;
  status: CacheStatus;
  createdAt: number;
  degraded: boolean;
  /** With status `stale`: why. */
  staleReason?: StaleReason;
  /**
   * The caller that started the flight won the lead of a stale value with an inline refresh
   * (the HTTP adapters): it waits for this; the callers that joined its flight take the stale value.
   */
  inline?: Promise<Answered<T>>;
}

/** A value for the caller whose loader made it (a private result): the flight's other callers run their own loader. */
export interface Own<T> {
  kind: 'own';
  value: T;
  status: CacheStatus;
  createdAt: number;
  degraded: boolean;
}

/** A hit-for-miss marker or a "not cacheable" announcement: every caller runs its own loader. */
export interface Marker {
  kind: 'marker';
}

/** The leader's loader gave up (`AbandonedLoad`): its callers look again and one of them leads. */
export interface Abandoned {
  kind: 'abandoned';
}

/** A flight's value, for its own caller or for all. */
export type Answered<T> = Shared<T> | Own<T>;

/** What a flight settles with: how the callers of this process that joined it are answered. */
export type Settled<T> = Answered<T> | Marker | Abandoned;

/** What a flight settles with when its callers should each run their own loader, at once. */
export const MARKER: Marker = { kind: 'marker' };

/** What callers joining a flight see when its loader was abandoned. */
export const ABANDONED: Abandoned = { kind: 'abandoned' };

/** A loader's value as the answer: for every caller, or (`own`: a private result) for its own caller only. */
export function ran<T>(value: T, status: CacheStatus, createdAt: number, degraded: boolean, own: boolean): Answered<T> {
  return own ? { kind: 'own', value, status, createdAt, degraded } : { kind: 'shared', value, status, createdAt, degraded };
}

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

export function rejoinIfAbandoned(error: unknown): Abandoned {
  if (error instanceof AbandonedLoad) return ABANDONED;
  throw error;
}
