import { monotonicNow } from '../shared/clock.js';
import type { Settled } from './settled.js';

/** Settles one plain caller's promise: with its answer, or with a promise of it (which may reject). */
export type Answer = (value: unknown) => void;

/**
 * The callers waiting on one flight, column by column: a caller is its slot in `answers` and
 * `loaders`. Their deadlines, in join order and so never decreasing, are kept as runs (callers
 * who joined in the same millisecond share one), and their TTL once for the group unless
 * callers differ in it.
 */
interface Group<L, A> {
  key: string;
  answers: Answer[];
  /** The caller's own loader and TTL, for the rare ways of ending that need them (a timeout, a private result, an error). */
  loaders: L[];
  /** The TTL of every caller, while they all passed the same one. */
  ttl: A | undefined;
  /** Each caller's TTL, once one differed. */
  ttls: A[] | undefined;
  /** Pairs: a deadline (a whole number of monotonic ms, the caller's `waitTimeout`), and the index past the last caller it holds for. */
  runs: number[];
  /** The first run not yet expired (an index into `runs`, even). */
  run: number;
  /** Callers before this index are answered already (timed out). */
  head: number;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The plain callers that join one flight of this process (a key, a loader, a TTL: no signal,
 * the cache's `waitTimeout`), kept as a few array slots each and answered together when the
 * flight settles, with one timer per flight for their wait bounds instead of one per caller.
 * Callers join in time order with one `waitTimeout`, so their deadlines come in order: the
 * timer serves the earliest, then the next. A caller's promise keeps only its resolve
 * function: the rare endings that reject resolve it with a rejected promise.
 */
export class Joiners<L, A> {
  private readonly groups = new Map<Promise<Settled<unknown>>, Group<L, A>>();

  constructor(
    /** Answers a caller of a flight that settled otherwise than with a value for all (an error, a private result, a marker, an abandoned run). */
    private readonly onSettled: (key: string, answer: Answer, loader: L, ttl: A, settled: Settled<unknown> | undefined, error: unknown) => void,
    /** Answers a caller whose `waitTimeout` passed first. */
    private readonly onTimeout: (key: string, answer: Answer, loader: L, ttl: A) => void,
  ) {}

  /** A promise for the caller's answer, settled by the flight of `key` or by its wait bound. */
  join(key: string, flight: Promise<Settled<unknown>>, waitTimeout: number, loader: L, ttl: A): Promise<unknown> {
    let group = this.groups.get(flight);
    if (group === undefined) {
      const created: Group<L, A> = { key, answers: [], loaders: [], ttl, ttls: undefined, runs: [], run: 0, head: 0, timer: undefined };
      group = created;
      this.groups.set(flight, created);
      flight.then(
        (settled) => this.settle(flight, created, settled, undefined),
        (error: unknown) => this.settle(flight, created, undefined, error),
      );
    }
    const g = group;
    const index = g.answers.length;
    const deadline = Math.ceil(monotonicNow() + waitTimeout);
    const { runs } = g;
    if (runs.length > g.run && runs[runs.length - 2] === deadline) runs[runs.length - 1] = index + 1;
    else runs.push(deadline, index + 1);
    g.loaders.push(loader);
    if (g.ttls !== undefined) g.ttls.push(ttl);
    else if (ttl !== g.ttl) {
      g.ttls = new Array<A>(index).fill(g.ttl as A);
      g.ttls.push(ttl);
    }
    if (g.timer === undefined) this.arm(g, waitTimeout);
    return new Promise((resolve) => {
      g.answers.push(resolve);
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
    const { runs, answers, loaders } = group;
    while (group.run < runs.length && runs[group.run]! <= now) {
      const end = runs[group.run + 1]!;
      group.run += 2;
      for (; group.head < end; group.head++) {
        const i = group.head;
        this.onTimeout(group.key, answers[i]!, loaders[i]!, ttlOf(group, i));
      }
    }
    if (group.run < runs.length) this.arm(group, runs[group.run]! - now);
    else clear(group);
  }

  private settle(flight: Promise<Settled<unknown>>, group: Group<L, A>, settled: Settled<unknown> | undefined, error: unknown): void {
    if (group.timer !== undefined) clearTimeout(group.timer);
    group.timer = undefined;
    // Callers who joined after an early answer wait in a group of their own.
    if (this.groups.get(flight) === group) this.groups.delete(flight);
    const { answers, loaders, head } = group;
    const ttl = group.ttl;
    const ttls = group.ttls;
    clear(group);
    if (settled?.kind === 'shared') {
      // The common ending: every caller gets the flight's value.
      const { value } = settled;
      for (let i = head; i < answers.length; i++) answers[i]!(value);
      return;
    }
    for (let i = head; i < answers.length; i++) this.onSettled(group.key, answers[i]!, loaders[i]!, ttls === undefined ? (ttl as A) : ttls[i]!, settled, error);
  }
}

function ttlOf<L, A>(group: Group<L, A>, i: number): A {
  return group.ttls === undefined ? (group.ttl as A) : group.ttls[i]!;
}

/** Forgets every caller of the group (all answered); a caller joining it later starts afresh. */
function clear<L, A>(group: Group<L, A>): void {
  group.answers = [];
  group.loaders = [];
  group.ttls = undefined;
  group.runs = [];
  group.run = 0;
  group.head = 0;
}
