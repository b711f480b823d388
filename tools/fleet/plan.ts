/**
 * What the fleet harness's two sides share: the clock every process reads, the plan of a
 * run of calls (`CallPlan`) and the record of one call (`CallRecord`).
 */

/**
 * Milliseconds on the machine's monotonic clock (`process.hrtime`: CLOCK_MONOTONIC on Linux),
 * with sub-millisecond precision. Every process of the machine reads the same clock, so times
 * taken in different processes compare; it never jumps with the wall clock.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * How one process makes its calls once the run starts:
 * - `burst`: `calls` calls all started at once (none awaits another);
 * - `lanes`: `lanes` lanes, each making `calls` calls one after another, `pauseMs` apart; without
 *   `calls`, until the parent sends `stop` (`Fleet.stop()`): each lane ends its call in flight;
 * - `open`: one call every `intervalMs` for `durationMs`, the first `offsetMs` after the start,
 *   on a schedule (open loop: a slow call does not delay the next; calls that fell behind are
 *   started at once); each record carries `due`, when the call was scheduled, so a latency can
 *   count from then (a stalled process does not hide its stall by calling less).
 *
 * `records: false` (`lanes`): the report counts the calls (`calls`, `failures`, `firstFailure`)
 * instead of listing them (long runs of quick calls).
 *
 * `settleMs` (`burst` and `open`): calls still pending this long after the last one started are
 * recorded as failed (`name: 'Unsettled'`) and the run is reported without waiting for them.
 */
export type CallPlan =
  | { mode: 'burst'; calls: number; settleMs?: number }
  | { mode: 'lanes'; lanes: number; calls?: number; pauseMs?: number; records?: boolean }
  | { mode: 'open'; intervalMs: number; durationMs: number; offsetMs?: number; settleMs?: number };

/** A plan as sent to a process: the start time (on `monotonicMs()`) is the same for every process; `run` numbers the run. */
export type StartCommand = CallPlan & { cmd: 'go'; at: number; run?: number };

/**
 * One call as a process saw it. The scenario's own fields (`value`, `status`, …) are spread in;
 * a call that threw carries `ok: false` and the error's `name`, `code`, `message`, and its
 * cause's `causeName` and `causeMessage`.
 */
export interface CallRecord {
  ok: boolean;
  /** The lane that made the call (0 in `burst` and `open` runs). */
  lane: number;
  /** The call's number in its lane. */
  index: number;
  /** `open` runs: when the call was due, on `monotonicMs()`. */
  due?: number;
  /** When the call started, on `monotonicMs()`. */
  at: number;
  /** How long it took (ms, monotonic). */
  latency: number;
  name?: string;
  code?: string;
  message?: string;
  causeName?: string;
  causeMessage?: string;
  [field: string]: unknown;
}

/** A process's answer to `go`: every call (`R`: the scenario's fields), and how many times its loader ran in this process. */
export interface RunReport<R extends object = object> {
  /** The planned start of the run, on `monotonicMs()` (no call started before it). */
  at: number;
  records: (CallRecord & R)[];
  loaderRuns: number;
  [field: string]: unknown;
}

/** Checks a plan before it is sent (a positive count, a finite duration), naming the field at fault. */
export function checkPlan(plan: CallPlan): void {
  const count = (field: string, value: unknown, min: number) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min) throw new RangeError(`Invalid plan.${field}: an integer of at least ${min} was expected, got ${String(value)}`);
  };
  const span = (field: string, value: unknown) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new RangeError(`Invalid plan.${field}: a finite number of milliseconds was expected, got ${String(value)}`);
  };
  if ('settleMs' in plan && plan.settleMs !== undefined) span('settleMs', plan.settleMs);
  switch (plan.mode) {
    case 'burst':
      return count('calls', plan.calls, 1);
    case 'lanes':
      count('lanes', plan.lanes, 1);
      if (plan.calls !== undefined) count('calls', plan.calls, 1);
      if (plan.pauseMs !== undefined) span('pauseMs', plan.pauseMs);
      return;
    case 'open':
      span('durationMs', plan.durationMs);
      if (plan.offsetMs !== undefined) span('offsetMs', plan.offsetMs);
      if (typeof plan.intervalMs !== 'number' || !(plan.intervalMs > 0)) throw new RangeError(`Invalid plan.intervalMs: a positive number was expected, got ${String(plan.intervalMs)}`);
      return;
    default:
      throw new RangeError(`Invalid plan.mode: burst, lanes or open was expected, got ${String((plan as { mode: unknown }).mode)}`);
  }
}
