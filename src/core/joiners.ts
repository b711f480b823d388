import { monotonicNow } from '../shared/clock.js';
import type { Settled } from './settled.js';

/** One plain caller waiting for a flight of this process: what it needs to be answered, nothing more. */
export interface Joiner<L, A> {
  /** Monotonic ms past which it stops waiting (its `waitTimeout`). */
  deadline: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** The caller's own loader and TTL, for the rare ways of ending that need them (a timeout, a private result, an error). */
  loader: L;
  ttl: A;
}

interface Group<L, A> {
  key: string;
  waiters: Joiner<L, A>[];
  /** Waiters before this index are answered already (timed out). */
  head: number;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The plain callers that join one flight of this process (a key, a loader, a TTL: no signal,
 * the cache's `waitTimeout`), kept as small records answered together when the flight settles,
 * with one timer per flight for their wait bounds instead of one per caller. Callers join in
 * time order with one `waitTimeout`, so their deadlines come in order: the timer serves the
 * earliest, then the next.
 */
export class Joiners<L, A> {
  private readonly groups = new Map<Promise<Settled<unknown>>, Group<L, A>>();

  constructor(
    /** Answers a caller of a flight that settled otherwise than with a value for all (an error, a private result, an abandoned run). */
    private readonly onSettled: (key: string, joiner: Joiner<L, A>, settled: Settled<unknown> | undefined, error: unknown) => void,
    /** Answers a caller whose `waitTimeout` passed first. */
    private readonly onTimeout: (key: string, joiner: Joiner<L, A>) => void,
  ) {}

  /** A promise for the caller's answer, settled by the flight of `key` or by its wait bound. */
  join(key: string, flight: Promise<Settled<unknown>>, waitTimeout: number, loader: L, ttl: A): Promise<unknown> {
    let group = this.groups.get(flight);
    if (group === undefined) {
      const created: Group<L, A> = { key, waiters: [], head: 0, timer: undefined };
      group = created;
      this.groups.set(flight, created);
      flight.then(
        (settled) => this.settle(flight, created, settled, undefined),
        (error: unknown) => this.settle(flight, created, undefined, error),
      );
    }
    const g = group;
    return new Promise((resolve, reject) => {
      // A whole number of ms (a small integer, kept in the record rather than boxed beside it).
      g.waiters.push({ deadline: Math.ceil(monotonicNow() + waitTimeout), resolve, reject, loader, ttl });
      if (g.timer === undefined) this.arm(g, waitTimeout);
    });
  }

  /**
   * Answers the callers joined to `flight` so far with `settled` before the flight itself
   * settles (its value is known early); callers joining later wait for the flight.
   */
  answer(flight: Promise<Settled<unknown>>, settled: Settled<unknown>): void {
    const group = this.groups.get(flight);
    if (group !== undefined) this.settle(flight, group, settled, undefined);
  }

  private arm(group: Group<L, A>, ms: number): void {
    group.timer = setTimeout(() => this.expire(group), Math.max(0, ms));
  }

  private expire(group: Group<L, A>): void {
    group.timer = undefined;
    const now = monotonicNow();
    while (group.head < group.waiters.length && group.waiters[group.head]!.deadline <= now) {
      const joiner = group.waiters[group.head]!;
      group.head++;
      this.onTimeout(group.key, joiner);
    }
    if (group.head < group.waiters.length) this.arm(group, group.waiters[group.head]!.deadline - now);
    else {
      group.waiters = [];
      group.head = 0;
    }
  }

  private settle(flight: Promise<Settled<unknown>>, group: Group<L, A>, settled: Settled<unknown> | undefined, error: unknown): void {
    if (group.timer !== undefined) clearTimeout(group.timer);
    group.timer = undefined;
    // Callers who joined after an early answer wait in a group of their own.
    if (this.groups.get(flight) === group) this.groups.delete(flight);
    const { waiters, head } = group;
    group.waiters = [];
    group.head = 0;
    if (settled !== undefined && !settled.private && settled.abandoned !== true) {
      // The common ending: every caller gets the flight's value.
      const { value } = settled;
      for (let i = head; i < waiters.length; i++) waiters[i]!.resolve(value);
      return;
    }
    for (let i = head; i < waiters.length; i++) this.onSettled(group.key, waiters[i]!, settled, error);
  }
}
