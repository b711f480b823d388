/**
 * The parent side of the fleet harness: N real Node processes, each running one scenario file
 * (`tools/fleet/scenarios/*.ts`, a `runMember` of ./member.ts) against the same real Redis,
 * each making the calls of a `CallPlan`, started together on the machine's monotonic clock.
 * The tests and the benchmarks share it:
 *
 *   const fleet = await Fleet.start('get-or-compute', 8, { url, key, loaderMs: 200 });
 *   const records = (await fleet.run({ mode: 'burst', calls: 100 })).flat();
 *   await fleet.close();
 *
 * Every wait is bounded; `close()` ends every process within its bound (SIGKILL past it), and
 * a process that is still running at the end of a test file is also killed by
 * `killAllChildren()` (tools/child-process.ts).
 */
import path from 'node:path';
import { JsonChild, root, type ChildOptions } from '../child-process.js';
import { checkPlan, monotonicMs, type CallPlan, type CallRecord, type RunReport } from './plan.js';

export interface FleetOptions extends ChildOptions {
  /** Node options before `--import tsx` (e.g. `--expose-gc`, another `--import`). */
  nodeArgs?: string[];
  /** Label of the processes in errors (default: the scenario's name). */
  label?: string;
  /** How long each process may take to say `ready` (default 60 s). */
  readyTimeoutMs?: number;
}

export interface RunOptions {
  /** How long the calls may take, from the start, before the run fails (default 60 s). */
  timeoutMs?: number;
  /** How far ahead of now the calls start, so every process is waiting when it comes (default 100 ms). */
  leadMs?: number;
  /** The start itself, on `monotonicMs()` (instead of `leadMs`): to start different plans together. */
  at?: number;
}

/** Numbers the runs of this process, so that each report is taken by the run it answers (a process may run several at once). */
let runs = 0;

/**
 * Starts the plan in fleet processes `members` at one moment `leadMs` from now and returns, per
 * process, a promise of its report; a process that dies first rejects its promise (handled
 * here, so killing one on purpose leaves no unhandled rejection).
 */
export function launch<R extends object = object>(members: JsonChild[], plan: CallPlan, options: RunOptions = {}): Promise<RunReport<R>>[] {
  checkPlan(plan);
  const { timeoutMs = 60_000, leadMs = 100 } = options;
  const at = options.at ?? monotonicMs() + leadMs;
  const run = ++runs;
  for (const m of members) m.send({ ...plan, cmd: 'go', at, run });
  return members.map((m) => {
    const report = m.take('done', Math.max(0, at - monotonicMs()) + timeoutMs, (message) => message.run === run) as Promise<unknown> as Promise<RunReport<R>>;
    report.catch(() => {});
    return report;
  });
}

/** The file of a scenario: a name in tools/fleet/scenarios, or a path from the repository root. */
function scenarioFile(scenario: string): string {
  return scenario.includes('/') ? path.join(root, scenario) : path.join(root, 'tools', 'fleet', 'scenarios', `${scenario}.ts`);
}

export class Fleet {
  private constructor(readonly members: JsonChild[]) {}

  /** Starts `count` processes of `scenario` with `config` (as JSON in their first argument) and waits until each is ready. */
  static async start(scenario: string, count: number, config: Record<string, unknown>, options: FleetOptions = {}): Promise<Fleet> {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`Invalid count: a positive integer was expected, got ${count}`);
    const { nodeArgs = [], label = path.basename(scenario, '.ts'), readyTimeoutMs = 60_000, ...childOptions } = options;
    const file = scenarioFile(scenario);
    const members = Array.from({ length: count }, (_, i) => new JsonChild(`${label}-${i}`, [...nodeArgs, '--import', 'tsx', file, JSON.stringify(config)], childOptions));
    const fleet = new Fleet(members);
    try {
      await Promise.all(members.map((m) => m.take('ready', readyTimeoutMs)));
    } catch (err) {
      await fleet.close();
      throw err;
    }
    return fleet;
  }

  get size(): number {
    return this.members.length;
  }

  member(i: number): JsonChild {
    const m = this.members[i];
    if (!m) throw new RangeError(`Invalid member: 0 to ${this.members.length - 1} was expected, got ${i}`);
    return m;
  }

  /**
   * Starts the plan in `members` (default: all) at one moment `leadMs` from now and returns,
   * per process, a promise of its report (see `launch` below).
   */
  launch<R extends object = object>(plan: CallPlan, options: RunOptions = {}, members: JsonChild[] = this.members): Promise<RunReport<R>>[] {
    return launch<R>(members, plan, options);
  }

  /** Runs the plan in every process, started together; each process's call records (`R`: the scenario's fields). */
  async run<R extends object = object>(plan: CallPlan, options: RunOptions = {}): Promise<(CallRecord & R)[][]> {
    return (await Promise.all(this.launch<R>(plan, options))).map((r) => r.records);
  }

  /** Ends an open-ended `lanes` run in every process (each lane after its call in flight); their reports follow. */
  stop(): void {
    for (const m of this.members) m.send({ cmd: 'stop' });
  }

  /** Sends `command` to every process and takes each one's `reply` message. */
  async ask(command: Record<string, unknown> & { cmd: string }, reply: string, timeoutMs = 30_000): Promise<Record<string, any>[]> {
    for (const m of this.members) m.send(command);
    return Promise.all(this.members.map((m) => m.take(reply, timeoutMs)));
  }

  /**
   * Asks every process still running to close and exit, SIGKILLs those that have not within
   * `timeoutMs`, and resolves once all are gone: true when every one exited by itself with code 0.
   */
  async close(timeoutMs = 10_000): Promise<boolean> {
    const clean = await Promise.all(this.members.map((m) => m.exit(timeoutMs)));
    return clean.every(Boolean);
  }
}
