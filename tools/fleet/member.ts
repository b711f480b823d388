/**
 * The child side of the fleet harness: a scenario file calls `runMember(scenario)` and becomes
 * one process of a fleet (`Fleet` in ./fleet.ts). The process reads its config (JSON) from its
 * first argument, starts the scenario, says `ready`, then obeys JSON commands on stdin, one a
 * line, answering JSON messages on stdout (`{ event, ... }`, the protocol of `JsonChild`):
 *
 * - `go { at, mode, ... }` (a `CallPlan`): waits for `at` on the shared monotonic clock (a
 *   timer, then a busy wait of its last 2 ms), makes
 *   the calls, answers `done { run, at, records, loaderRuns, ...report }` once every call settled
 *   (`run`: the number the parent gave the run);
 * - `stop`: the lanes of an open-ended `lanes` run end after their call in flight (then `done`);
 * - `prepare { ... }`: the scenario's `prepare`, answered `prepared { ... }`;
 * - `exit`, or stdin closing: the scenario's `close`, then the process exits (code 0), by
 *   itself within `CLOSE_BOUND_MS` even if closing hangs (code 1 then);
 * - any other `cmd`: the scenario's handler of that name, answered with what it returns.
 *
 * A failing command, an unhandled rejection or an uncaught exception is reported (`fatal`,
 * `unhandled-rejection`) and ends the process with code 1, so the parent sees it at once.
 */
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { monotonicMs, type CallRecord, type RunReport, type StartCommand } from './plan.js';

/** What a scenario's process can do besides calling. */
export interface MemberContext {
  /** Sends a message to the parent (e.g. `loader { run }` the moment a loader starts). */
  emit(event: string, fields?: Record<string, unknown>): void;
  /** Counts one loader run of this process (reported with the run's records). */
  loaderRan(): void;
}

export interface CallContext {
  lane: number;
  /** The call's number in its lane (its number in the run for `burst` and `open`). */
  index: number;
}

/** One process's part of a scenario, made by `Scenario.start`. */
export interface Member {
  /** One call; what it returns is spread into the call's record. A throw makes an `ok: false` record. (A scenario driven by its commands only has none.) */
  call?(ctx: CallContext): Promise<Record<string, unknown>>;
  /** Before each run (e.g. to reset what `report` counts), with the run's command. */
  beforeRun?(command: StartCommand): void;
  /** Extra fields of the `done` message (measured during the run); the report waits for it. */
  report?(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Handles `prepare`; what it returns goes with `prepared`. */
  prepare?(command: Record<string, unknown>): Promise<Record<string, unknown> | void>;
  /** Handlers of other commands: each answers `{ event: <cmd>ed-or-given, ... }` (see `reply`). */
  commands?: Record<string, (command: Record<string, unknown>) => Promise<{ event: string } & Record<string, unknown>>>;
  /** Commands answered at once, not behind a command still running (a measurement's trigger). */
  immediate?: string[];
  /** Closes every connection and timer the scenario opened. */
  close(): Promise<void>;
}

export interface Scenario<Config> {
  start(config: Config, ctx: MemberContext): Promise<Member>;
}

/** How long `exit` may take before the process ends anyway. */
const CLOSE_BOUND_MS = 10_000;

/** Sends a message to the parent (what `MemberContext.emit` does, for code outside `start`). */
export function send(message: { event: string } & Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** The config of this process: its first argument, as JSON. */
export function memberConfig<Config>(): Config {
  return JSON.parse(process.argv[2] ?? '{}') as Config;
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

function fatal(event: string, err: unknown): never {
  send({ event, message: describe(err) });
  process.exit(1);
}

/** Reports `err` to the parent (`fatal`) and ends the process with code 1. */
export function fail(err: unknown): never {
  return fatal('fatal', err);
}

/** The record of a call that threw: the error's name, code, message and cause. */
export function errorFields(err: unknown): Partial<CallRecord> {
  const e = err as Error & { code?: string; cause?: Error };
  return { name: e?.name, code: e?.code, message: e?.message, causeName: e?.cause?.name, causeMessage: e?.cause?.message };
}

async function timed(ctx: CallContext, call: NonNullable<Member['call']>, due?: number): Promise<CallRecord> {
  const at = monotonicMs();
  const base = { lane: ctx.lane, index: ctx.index, at, ...(due === undefined ? {} : { due }) };
  try {
    const fields = await call(ctx);
    return { ok: true, ...base, latency: monotonicMs() - at, ...fields };
  } catch (err) {
    return { ok: false, ...base, latency: monotonicMs() - at, ...errorFields(err) };
  }
}

/**
 * The records of `calls` (made with these contexts); with `settleMs`, those still pending that
 * long after now are recorded as failed, without waiting for them.
 */
async function settle(calls: Promise<CallRecord>[], contexts: CallContext[], settleMs: number | undefined): Promise<CallRecord[]> {
  if (settleMs === undefined) return Promise.all(calls);
  const records: (CallRecord | undefined)[] = new Array(calls.length);
  const done = Promise.all(calls.map((c, i) => c.then((r) => void (records[i] = r))));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise((resolve) => (timer = setTimeout(resolve, settleMs)))]);
  clearTimeout(timer);
  const now = monotonicMs();
  return Array.from(
    records,
    (r, i) => r ?? { ok: false, lane: contexts[i]!.lane, index: contexts[i]!.index, at: now, latency: Number.NaN, name: 'Unsettled', message: `did not settle within ${settleMs} ms of the last call's start` },
  );
}

/** Waits until `at` on the monotonic clock (a timer may fire a little early by that clock: it waits again). */
async function until(at: number): Promise<void> {
  for (let wait = at - monotonicMs(); wait > 0; wait = at - monotonicMs()) await delay(Math.ceil(wait));
}

/** Set by `stop`: the lanes of an open-ended run end after their call in flight. */
let stopping = false;

/** Busy-waits the last `SPIN_MS` before a run's start, so that the processes start within a fraction of a millisecond. */
const SPIN_MS = 2;

async function run(member: Member, command: StartCommand): Promise<CallRecord[]> {
  await until(command.at - SPIN_MS);
  while (monotonicMs() < command.at) {
    /* spin the last milliseconds: a timer may wake a millisecond late */
  }
  if (!member.call) throw new Error('this scenario makes no calls: it is driven by its commands');
  const call = member.call.bind(member) as NonNullable<Member['call']>;
  switch (command.mode) {
    case 'burst': {
      const contexts = Array.from({ length: command.calls }, (_, index) => ({ lane: 0, index }));
      return settle(contexts.map((ctx) => timed(ctx, call)), contexts, command.settleMs);
    }
    case 'lanes': {
      const lanes = await Promise.all(
        Array.from({ length: command.lanes }, async (_, lane) => {
          const records: CallRecord[] = [];
          const more = (index: number) => (command.calls === undefined ? !stopping : index < command.calls);
          for (let index = 0; more(index); index++) {
            if (index > 0 && command.pauseMs) await delay(command.pauseMs);
            // A stop during the pause ends the lane before another call.
            if (!more(index)) break;
            records.push(await timed({ lane, index }, call));
          }
          return records;
        }),
      );
      return lanes.flat();
    }
    case 'open': {
      const contexts: CallContext[] = [];
      const calls: Promise<CallRecord>[] = [];
      const first = command.at + (command.offsetMs ?? 0);
      for (let index = 0; index * command.intervalMs < command.durationMs; index++) {
        const due = first + index * command.intervalMs;
        await until(due);
        contexts.push({ lane: 0, index });
        calls.push(timed({ lane: 0, index }, call, due));
      }
      return settle(calls, contexts, command.settleMs);
    }
  }
}

/** Makes this process a fleet member running `scenario` with the config of its first argument. */
export function runMember<Config>(scenario: Scenario<Config>): void {
  process.on('unhandledRejection', (reason) => fatal('unhandled-rejection', reason));
  process.on('uncaughtException', (err) => fatal('fatal', err));
  const config = memberConfig<Config>();
  /** Loader runs of this process so far (each run reports those made while it ran). */
  let loaderRuns = 0;
  const ctx: MemberContext = {
    emit: (event, fields = {}) => send({ ...fields, event }),
    loaderRan: () => void loaderRuns++,
  };
  let closing = false;
  void scenario.start(config, ctx).then((member) => {
    const exit = async () => {
      if (closing) return;
      closing = true;
      rl.close();
      const bound = setTimeout(() => fatal('fatal', new Error(`closing took more than ${CLOSE_BOUND_MS} ms`)), CLOSE_BOUND_MS);
      await member.close();
      clearTimeout(bound);
      process.exit(0);
    };
    const handle = async (command: Record<string, unknown> & { cmd: string }) => {
      if (command.cmd === 'go') {
        const runsBefore = loaderRuns;
        member.beforeRun?.(command as unknown as StartCommand);
        stopping = false;
        const start = command as unknown as StartCommand;
        const records = await run(member, start);
        const listed = start.mode !== 'lanes' || start.records !== false;
        const failed = listed ? [] : records.filter((r) => !r.ok);
        const counts = listed ? {} : { calls: records.length, failures: failed.length, firstFailure: failed[0] && `${failed[0].name}: ${failed[0].message}` };
        const report: RunReport = { at: start.at, records: listed ? records : [], loaderRuns: loaderRuns - runsBefore, ...counts, ...(await member.report?.()) };
        // The run's number, as the parent gave it, so that its report goes to that run.
        report.run = command.run;
        send({ event: 'done', ...report });
      } else if (command.cmd === 'stop') {
        stopping = true;
      } else if (command.cmd === 'prepare') {
        send({ event: 'prepared', ...(await member.prepare?.(command)) });
      } else if (command.cmd === 'exit') {
        await exit();
      } else {
        const handler = member.commands?.[command.cmd];
        if (!handler) throw new Error(`unknown command ${command.cmd}`);
        send(await handler(command));
      }
    };
    const rl = createInterface({ input: process.stdin });
    // `go`, `stop` and the scenario's immediate commands run at once, concurrently with later
    // commands (a test may send more while calls are in flight); every other command waits for
    // the one before it.
    let queue = Promise.resolve();
    rl.on('line', (line) => {
      if (line.trim() === '') return;
      const command = JSON.parse(line) as Record<string, unknown> & { cmd: string };
      if (command.cmd === 'go' || command.cmd === 'stop' || member.immediate?.includes(command.cmd)) void handle(command).catch((err: unknown) => fatal('fatal', err));
      else queue = queue.then(() => handle(command)).catch((err: unknown) => fatal('fatal', err));
    });
    rl.on('close', () => void exit().catch((err: unknown) => fatal('fatal', err)));
    send({ event: 'ready', pid: process.pid });
  }, (err: unknown) => fatal('fatal', err));
}
