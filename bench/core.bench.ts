/**
 * The cache core against its peers (issue 3, "Benchmark"), in one run on one Redis:
 *
 * - stampede A (4 processes × 50 callers) and B (1 process × 200 callers) on a cold key with
 *   a 100 ms loader: loader runs, each caller's latency beyond the loader, Redis commands;
 * - hit path: sequential and 100-in-flight reads of a warm key, against raw ioredis GET of the
 *   same bytes and raw lru-cache `get`.
 *
 * The processes are a fleet of `bench/scenarios/core.ts`; this module coordinates them, counts
 * Redis commands (INFO commandstats, with MONITOR to tell script-internal commands apart) and
 * writes the markdown section.
 *
 * `CORE_BENCH_ONLY=dogpile,acd npm run bench -- core` restricts the stampedes to some
 * contenders (for investigation; the section then lacks the others).
 *
 * `CORE_BENCH_BASELINE=<another checkout> npm run bench -- core` adds, in the same run,
 * dogpile-guard built from that checkout's `src/index.ts` (run by tsx; the checkouts share
 * node_modules) next to the current one — in the stampedes (`dogpile@baseline`) and in the
 * Redis, L1 and embedded hit measurements — interleaved like every other contender, and a
 * "current vs baseline" table of per-repeat ratios. For "did this change make it slower?".
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sleep } from '../tools/basics.js';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { commandCounts, median, percentile, ratio, summary } from './lib/stats.js';
import { useBuiltSources } from './lib/built-sources.js';
import type { BenchContext } from './lib/types.js';
import { root, type JsonChild } from '../tools/child-process.js';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import * as cacheScripts from '../src/store/cache-scripts.js';
import { EXTEND } from '../src/redis/extend-script.js';
import { LuaScript } from '../src/redis/lua-script.js';

// --- contenders ---------------------------------------------------------------------------

export type StampedeContender = 'dogpile' | 'dogpile@baseline' | 'none' | 'acd' | 'bento' | 'cm' | 'redlock' | 'semaphore';

/** Another checkout of dogpile-guard measured next to this one (CORE_BENCH_BASELINE). */
interface Baseline {
  dir: string;
  /** "dogpile-guard @baseline (<short commit>)". */
  label: string;
  /** Short commit of this checkout, for the comparison table. */
  current: string;
}

/** Short commit of a checkout, with "+changes" when its src/ differs from that commit. */
function commitOf(dir: string): string {
  const git = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const dirty = git('status', '--porcelain', '--', 'src') !== '';
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? '+changes' : ''}`;
  } catch {
    return path.basename(dir);
  }
}

function baselineFromEnv(value: string | undefined): Baseline | undefined {
  if (!value) return undefined;
  const dir = path.resolve(value);
  if (!existsSync(path.join(dir, 'src', 'index.ts'))) throw new Error(`CORE_BENCH_BASELINE: no src/index.ts in ${dir}`);
  useBuiltSources(dir, 'core-baseline');
  return { dir, label: `dogpile-guard @baseline (${commitOf(dir)})`, current: commitOf(root) };
}

/** The contenders of the stampedes, tables and ratios: the peers, plus the baseline's if any. */
interface Contenders {
  stampede: { id: StampedeContender; name: string; scope: 'cross-process' | 'in-process' | 'none' }[];
  hitRedis: { id: string; name: string }[];
  hitMemory: { id: string; name: string }[];
}

function contenders(baseline: Baseline | undefined): Contenders {
  if (!baseline) return { stampede: STAMPEDE, hitRedis: HIT_REDIS, hitMemory: HIT_MEMORY };
  const after = <T extends { id: string }>(list: T[], id: string, added: T) => list.flatMap((c) => (c.id === id ? [c, added] : [c]));
  return {
    stampede: after(STAMPEDE, 'dogpile', { id: 'dogpile@baseline', name: `${baseline.label} (\`createCache({ redis })\`)`, scope: 'cross-process' }),
    hitRedis: after(after(HIT_REDIS, 'dogpile', { id: 'dogpile@baseline', name: `${baseline.label}, Redis (no L1)` }), 'dogpile-json', {
      id: 'dogpile-json@baseline',
      name: `${baseline.label}, Redis, \`serializer: jsonSerializer\``,
    }),
    hitMemory: after(
      after(after(HIT_MEMORY, 'dogpile-l1', { id: 'dogpile-l1@baseline', name: `${baseline.label}, Redis + \`l1: true\` (L1 hit)` }), 'dogpile-embedded', {
        id: 'dogpile-embedded@baseline',
        name: `${baseline.label}, embedded (no Redis)`,
      }),
      'dogpile-embedded-options',
      { id: 'dogpile-embedded-options@baseline', name: `${baseline.label}, embedded, options object` },
    ),
  };
}

/** The loader's duration in every contender (bench/scenarios/core.ts). */
export const LOADER_MS = 100;
/** A caller that has not settled after this long is counted as an error. */
const CALL_DEADLINE_MS = 25_000;

/** dogpile-guard and its peers (the baseline's contender is added by `contenders()`). */
const STAMPEDE: { id: StampedeContender; name: string; scope: 'cross-process' | 'in-process' | 'none' }[] = [
  { id: 'dogpile', name: 'dogpile-guard (`createCache({ redis })`)', scope: 'cross-process' },
  { id: 'none', name: 'no protection (GET, load, SET)', scope: 'none' },
  { id: 'acd', name: 'async-cache-dedupe (redis storage)', scope: 'in-process' },
  { id: 'bento', name: 'bentocache (memory L1 + redis L2)', scope: 'in-process' },
  { id: 'cm', name: 'cache-manager `wrap` (Keyv + @keyv/redis)', scope: 'in-process' },
  { id: 'redlock', name: 'cache-aside + redlock 4 lock', scope: 'cross-process' },
  { id: 'semaphore', name: 'cache-aside + redis-semaphore `Mutex`', scope: 'cross-process' },
];

/** Orders of the repeats; the baseline, when there is one, runs next to dogpile-guard, before or after it. */
const STAMPEDE_ORDERS: StampedeContender[][] = [
  ['dogpile', 'dogpile@baseline', 'none', 'acd', 'bento', 'cm', 'redlock', 'semaphore'],
  ['semaphore', 'redlock', 'cm', 'bento', 'acd', 'none', 'dogpile@baseline', 'dogpile'],
  ['acd', 'dogpile@baseline', 'redlock', 'dogpile', 'none', 'semaphore', 'cm', 'bento'],
];

const SCENARIOS = [
  { id: 'A', title: 'Stampede A: 4 processes × 50 concurrent callers', processes: 4, callers: 50 },
  { id: 'B', title: 'Stampede B: 1 process × 200 concurrent callers', processes: 1, callers: 200 },
] as const;

type HitMode = 'seq' | 'inflight-same' | 'inflight-distinct';

const HIT_REDIS = [
  { id: 'raw-get', name: 'raw ioredis `getBuffer` of the same bytes (baseline)' },
  { id: 'dogpile', name: 'dogpile-guard, Redis (no L1)' },
  { id: 'dogpile-json', name: 'dogpile-guard, Redis, `serializer: jsonSerializer`' },
  { id: 'raw-get-v8', name: '_diagnostic:_ raw `getBuffer` + the entry decode (header and default serializer)' },
  { id: 'raw-lookup', name: '_diagnostic:_ raw `EVALSHA` of dogpile-guard\'s lookup script' },
  { id: 'acd', name: 'async-cache-dedupe (redis storage)' },
  { id: 'cm', name: 'cache-manager `wrap` (Keyv + @keyv/redis)' },
];
const HIT_MEMORY = [
  { id: 'raw-lru', name: 'raw lru-cache `get` (baseline, synchronous loop)' },
  { id: 'async-lru', name: '_diagnostic:_ lru-cache `get` in an async function, awaited' },
  { id: 'dogpile-l1', name: 'dogpile-guard, Redis + `l1: true` (L1 hit)' },
  { id: 'dogpile-embedded', name: 'dogpile-guard, embedded (no Redis)' },
  { id: 'dogpile-embedded-options', name: 'dogpile-guard, embedded, options object (`{ ttl, staleWhileRevalidate }`: checked at every call)' },
  { id: 'bento', name: 'bentocache (memory L1 hit)' },
];
const HIT_KEYS = 100;
/** No new stampede repeat starts after this many seconds (a third of it with BENCH_QUICK). */
const STAMPEDE_BUDGET_S = 110;
/** No new hit-path repeat starts after this many seconds from the start. */
const TOTAL_BUDGET_S = 180;

// --- Redis command counting -----------------------------------------------------------------

interface MonitorLine {
  args: string[];
  source: string;
}

export interface CommandCount {
  /** Commands sent by the contender's clients (EVAL/EVALSHA count once). */
  client: number;
  /** Commands run inside Lua scripts (excluded from `client`). */
  inScripts: number;
  /** Client commands by name, from INFO commandstats minus script-internal ones. */
  byName: Record<string, number>;
  /** Client commands seen by MONITOR, as a cross-check of `client`. */
  monitorClient: number;
  /** Every client command of the window in order, with the commands its script ran. */
  trace: TracedCommand[];
}

/** One client command seen by MONITOR: its connection, its name, for EVALSHA the script's name and what it ran inside. */
export interface TracedCommand {
  source: string;
  name: string;
  script?: string;
  inScript: string[];
}

/** dogpile-guard's scripts by SHA, to name them in the trace. */
const SCRIPT_NAMES = new Map(
  ([...Object.values(cacheScripts), EXTEND] as unknown[]).filter((v): v is LuaScript => v instanceof LuaScript).map((script) => [script.sha, script.name] as const),
);

/** How long Redis must see no command before a stampede's window opens, and the longest wait for that. */
const QUIET_MS = 30;
const QUIET_BOUND_MS = 3000;

/**
 * Counts the Redis commands of one stampede. The window is delimited by two `INFO
 * commandstats` calls on the control connection; MONITOR runs throughout and tells which of
 * the counted commands ran inside a script (source `lua`) and which INCRs were the
 * benchmark's own loader counter.
 */
export class CommandCounter {
  private lines: MonitorLine[] = [];
  private before: Record<string, number> = {};
  private controlAddr = '';

  private constructor(
    private readonly control: Redis,
    private readonly monitor: Redis,
  ) {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      this.lines.push({ args, source });
    });
  }

  static async open(control: Redis): Promise<CommandCounter> {
    const monitor = await control.monitor();
    const counter = new CommandCounter(control, monitor);
    const { localAddress, localPort } = control.stream as unknown as { localAddress: string; localPort: number };
    counter.controlAddr = `${localAddress}:${localPort}`;
    return counter;
  }

  /**
   * Opens the window once Redis has been quiet for `QUIET_MS` (bounded by `QUIET_BOUND_MS`):
   * what a contender does in the background after its warm-up (a cache instance opening its
   * subscriber connection and following its generation stamp, once per instance) belongs to
   * its start, not to the stampede.
   */
  async start(): Promise<void> {
    const deadline = Date.now() + QUIET_BOUND_MS;
    let last = commandCounts(String(await this.control.info('commandstats')));
    for (;;) {
      await sleep(QUIET_MS);
      const now = commandCounts(String(await this.control.info('commandstats')));
      const busy = Object.entries(now).some(([name, calls]) => name !== 'info' && calls !== (last[name] ?? 0));
      last = now;
      if (!busy || Date.now() > deadline) break;
    }
    this.lines = [];
    this.before = commandCounts(String(await this.control.info('commandstats')));
  }

  async stop(counterKey: string): Promise<CommandCount> {
    const after = commandCounts(String(await this.control.info('commandstats')));
    const isMarker = (l: MonitorLine) => l.source === this.controlAddr && l.args[0]?.toLowerCase() === 'info';
    const deadline = Date.now() + 3000;
    while (this.lines.filter(isMarker).length < 2 && Date.now() < deadline) await sleep(5);
    const first = this.lines.findIndex(isMarker);
    const last = this.lines.findLastIndex(isMarker);
    const window = this.lines.slice(first + 1, last);
    if (process.env.CORE_BENCH_TRACE === '1') for (const l of window) process.stdout.write(`    ${l.source} ${l.args.map((a) => a.slice(0, 60)).join(' ')}\n`);
    const inScripts: Record<string, number> = {};
    let monitorClient = 0;
    let counterIncrs = 0;
    const trace: TracedCommand[] = [];
    for (const l of window) {
      const name = (l.args[0] ?? '').toLowerCase();
      if (l.source === 'lua') {
        inScripts[name] = (inScripts[name] ?? 0) + 1;
        // MONITOR lists a script's commands right after the EVALSHA that ran them.
        trace[trace.length - 1]?.inScript.push(name.toUpperCase());
      } else if (name === 'incr' && l.args[1] === counterKey) counterIncrs++;
      else {
        monitorClient++;
        const script = name === 'evalsha' ? SCRIPT_NAMES.get(l.args[1] ?? '') ?? 'script' : undefined;
        trace.push({ source: l.source, name: name.toUpperCase(), ...(script ? { script } : {}), inScript: [] });
      }
    }
    const byName: Record<string, number> = {};
    for (const [name, calls] of Object.entries(after)) {
      let n = calls - (this.before[name] ?? 0) - (inScripts[name] ?? 0);
      if (name === 'info') n -= 1; // the first marker
      if (name === 'incr') n -= counterIncrs;
      if (n > 0) byName[name] = n;
    }
    return {
      client: Object.values(byName).reduce((a, b) => a + b, 0),
      inScripts: Object.values(inScripts).reduce((a, b) => a + b, 0),
      byName,
      monitorClient,
      trace,
    };
  }

  close(): void {
    this.monitor.disconnect();
  }
}

// --- stampedes ------------------------------------------------------------------------------

export interface StampedeRun {
  loaderRuns: number;
  localRuns: number;
  excess: number[];
  /** Min–max excess per process, for the progress log. */
  perProcess: string[];
  /** Latest minus earliest process start (ms). */
  startSkew: number;
  /** Per process, ms after the agreed start: loaderStart, loaderEnd (if it ran the loader), firstSettled, lastSettled. */
  timelines: Record<string, number>[];
  errors: number;
  errorSamples: string[];
  commands: CommandCount;
}

export async function runStampede(
  members: readonly JsonChild[],
  control: Redis,
  counter: CommandCounter,
  contender: StampedeContender,
  scenario: { id: string; processes: number; callers: number },
  repeat: number,
): Promise<StampedeRun> {
  const tag = `${contender}:${scenario.id}:${repeat}:${Date.now().toString(36)}`;
  const key = `bench:core:${tag}`;
  const counterKey = `bench:core:loader-runs:${tag}`;
  const used = members.slice(0, scenario.processes);
  for (const w of used) w.send({ cmd: 'prepare', contender, key, counterKey });
  await Promise.all(used.map((w) => w.take('prepared', 20_000)));
  await counter.start();
  const reports = await Promise.all(
    launch<object>(used, { mode: 'burst', calls: scenario.callers, settleMs: CALL_DEADLINE_MS }, { timeoutMs: CALL_DEADLINE_MS + 15_000 }),
  );
  const done = reports.map((r) => {
    const failed = r.records.filter((c) => !c.ok);
    const errors = failed.map((c) => (c.name === 'Unsettled' ? `a caller did not settle within ${CALL_DEADLINE_MS} ms` : `${c.name}: ${c.message}`));
    return {
      excess: r.records.filter((c) => c.ok).map((c) => c.latency - LOADER_MS),
      errors: errors.slice(0, 5),
      errorCount: errors.length,
      localRuns: r.loaderRuns,
      startedLate: Math.min(...r.records.map((c) => c.at)) - r.at,
      timeline: r.timeline as Record<string, number>,
    };
  });
  const commands = await counter.stop(counterKey);
  const loaderRuns = Number((await control.get(counterKey)) ?? 0);
  await Promise.all(used.map((w) => (w.send({ cmd: 'dispose' }), w.take('disposed', 20_000))));
  return {
    loaderRuns,
    localRuns: done.reduce((a, d) => a + Number(d.localRuns), 0),
    excess: done.flatMap((d) => d.excess as number[]),
    perProcess: done.map((d) => {
      const e = d.excess as number[];
      const t = d.timeline as Record<string, number>;
      const f = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(1));
      return e.length
        ? `${Math.min(...e).toFixed(1)}–${Math.max(...e).toFixed(1)} [load ${f(t.loaderStart)}→${f(t.loaderEnd)}, settled ${f(t.firstSettled)}→${f(t.lastSettled)}]`
        : 'n/a';
    }),
    timelines: done.map((d) => d.timeline as Record<string, number>),
    startSkew: Math.max(...done.map((d) => Number(d.startedLate))) - Math.min(...done.map((d) => Number(d.startedLate))),
    errors: done.reduce((a, d) => a + Number(d.errorCount), 0),
    errorSamples: done.flatMap((d) => d.errors as string[]),
    commands,
  };
}

// --- hit path -------------------------------------------------------------------------------

interface HitPlan {
  group: 'redis' | 'memory';
  mode: HitMode;
  contenders: string[];
  slices: number;
  opsPerSlice?: number;
  sliceMs?: number;
  warmup: number;
}

/**
 * Redis-backed reads: a fixed number per contender, in 20 slices; in-memory reads: 10 time
 * slices. Fine slices make the contenders of one measurement see the same machine load.
 */
function hitPlans(quick: boolean, list: Contenders): HitPlan[] {
  const redis = list.hitRedis.map((c) => c.id);
  const memory = list.hitMemory.map((c) => c.id);
  const seq = quick ? 5000 : 10_000;
  const flight = quick ? 10_000 : 25_000;
  const warmup = quick ? 500 : 2000;
  const sliceMs = quick ? 15 : 40;
  return [
    { group: 'redis', mode: 'seq', contenders: redis, slices: 20, opsPerSlice: seq / 20, warmup },
    { group: 'redis', mode: 'inflight-same', contenders: redis, slices: 20, opsPerSlice: flight / 20, warmup },
    { group: 'redis', mode: 'inflight-distinct', contenders: redis, slices: 20, opsPerSlice: flight / 20, warmup },
    { group: 'memory', mode: 'seq', contenders: memory, slices: 10, sliceMs, warmup: 20_000 },
    { group: 'memory', mode: 'inflight-distinct', contenders: memory.filter((id) => id !== 'raw-lru'), slices: 10, sliceMs, warmup: 20_000 },
  ];
}

// --- report ---------------------------------------------------------------------------------

/** Why each command of dogpile-guard's stampede is sent, by command (and script) and the role of its process. */
const WHY: Record<string, string> = {
  'lead:EVALSHA lookup':
    'look up or lead: no value (`GET`) and no lock (`PTTL` -2), so the lead is taken (`SET NX PX`); `TIME` dates the lead on the server\'s clock (the value\'s start) and refuses it to a caller that already gave up',
  'lead:EVALSHA commit':
    'store, release and announce in one script: `GET` checks that the lock is still this leader\'s, `DEL` releases it, `TIME` + `GETRANGE` date the value on the server\'s clock strictly after the key\'s previous write, `SET` stores it, `PUBLISH` hands it to the waiters inline',
  'wait:EVALSHA lookup':
    'look up: no value, a live lock (`PTTL`: its remaining time bounds the wait). The first before subscribing; the second once the `SUBSCRIBE` is confirmed, so that an announcement made between the two is not missed. Neither reads the clock nor tries a `SET NX` that must fail',
  'wait:SUBSCRIBE': "the key's channel, on the process's subscriber connection: the leader's `PUBLISH` wakes every caller of the process at once",
  'wait:UNSUBSCRIBE': 'the channel dropped a linger (1 s) after the last waiter of the key left',
  'any:INFO': "ready check of a subscriber connection opened inside the window (a process's first wait)",
  'any:GET': "a generation stamp read once by a cache instance that does not follow it yet (its first call)",
};

/**
 * The table of every command of one dogpile-guard stampede, per process: MONITOR's client
 * commands grouped by connection; the connection that commits is the leader's, those that only
 * look up are the waiting processes', those that subscribe are their subscriber connections.
 */
function commandsPerProcess(run: StampedeRun, processes: number): string[] {
  const byConnection = new Map<string, TracedCommand[]>();
  for (const c of run.commands.trace) byConnection.set(c.source, [...(byConnection.get(c.source) ?? []), c]);
  const label = (c: TracedCommand) => `${c.name}${c.script ? ` ${c.script}` : ''}`;
  const leading = [...byConnection.values()].filter((cs) => cs.some((c) => c.script === 'commit'));
  const waiting = processes - leading.length;
  const rows = new Map<string, { role: 'lead' | 'wait'; label: string; inside: string; count: number }>();
  for (const commands of byConnection.values()) {
    const role = commands.some((c) => c.script === 'commit') ? 'lead' : 'wait';
    for (const c of commands) {
      const inside = c.inScript.join(', ');
      const id = `${role}|${label(c)}|${inside}`;
      const row = rows.get(id) ?? { role, label: label(c), inside, count: 0 };
      row.count++;
      rows.set(id, row);
    }
  }
  const out: string[] = [];
  out.push(`### Every command of one dogpile-guard stampede A, per process (the median run: ${run.commands.client} sent, ${run.commands.inScripts} run inside scripts)`);
  out.push('');
  out.push(
    `From MONITOR: each client command with the commands its script ran, grouped by connection. The leading process is the one whose connection commits; the ${waiting} others wait ` +
      '(their command and subscriber connections together). Counts per process; *inside the script* is what one call of the script ran.',
  );
  out.push('');
  out.push('| process | command | per process | inside the script | why |');
  out.push('|---|---|---:|---|---|');
  const sorted = [...rows.values()].sort((a, b) => (a.role === b.role ? 0 : a.role === 'lead' ? -1 : 1));
  for (const r of sorted) {
    const per = r.role === 'lead' ? r.count / Math.max(1, leading.length) : r.count / Math.max(1, waiting);
    const why = WHY[`${r.role}:${r.label}`] ?? WHY[`any:${r.label.split(' ')[0]}`] ?? '—';
    out.push(`| ${r.role === 'lead' ? 'leading (1)' : `waiting (${waiting})`} | \`${r.label}\` | ${Number.isInteger(per) ? per : per.toFixed(2)} | ${r.inside || '—'} | ${why} |`);
  }
  out.push(`| waiting (${waiting}) | \`UNSUBSCRIBE\` | 1 | — | ${WHY['wait:UNSUBSCRIBE']}: after the measured window |`);
  const total = (role: 'lead' | 'wait', per: number) => {
    const mine = sorted.filter((r) => r.role === role);
    const sent = mine.reduce((a, r) => a + r.count, 0) / per;
    const inside = mine.reduce((a, r) => a + r.count * (r.inside === '' ? 0 : r.inside.split(', ').length), 0) / per;
    return { sent, executed: sent + inside };
  };
  const lead = total('lead', Math.max(1, leading.length));
  const wait = total('wait', Math.max(1, waiting));
  const f = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));
  out.push('');
  out.push(
    `In the window: the leading process ${f(lead.sent)} commands sent, ${f(lead.executed)} run in Redis with those inside its scripts (the commit included); ` +
      `each waiting process ${f(wait.sent)} sent, ${f(wait.executed)} run — and its \`UNSUBSCRIBE\` a second later.`,
  );
  return out;
}

const ms = (values: number[]) => summary(values, 1);
const int = (values: number[]) => summary(values, 0);
const kops = (values: number[]) => summary(values.map((v) => v / 1000), 1);

function fmtByName(byName: Record<string, number>): string {
  return (
    Object.entries(byName)
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([n, c]) => `${n.toUpperCase()} ${c}`)
      .join(', ') || '—'
  );
}

/** The run whose client-command count is the median one (for the per-command breakdown). */
function medianRun(runs: StampedeRun[]): StampedeRun {
  const sorted = [...runs].sort((a, b) => a.commands.client - b.commands.client);
  return sorted[Math.ceil(sorted.length / 2) - 1]!;
}

interface StampedeStats {
  runs: number[];
  p50: number[];
  p99: number[];
  max: number[];
  commands: number[];
  inScripts: number[];
  errors: number;
}

function stampedeStats(runs: StampedeRun[]): StampedeStats {
  return {
    runs: runs.map((r) => r.loaderRuns),
    p50: runs.map((r) => percentile(r.excess, 50)),
    p99: runs.map((r) => percentile(r.excess, 99)),
    max: runs.map((r) => Math.max(...r.excess)),
    commands: runs.map((r) => r.commands.client),
    inScripts: runs.map((r) => r.commands.inScripts),
    errors: runs.reduce((a, r) => a + r.errors, 0),
  };
}

/**
 * From the per-process timelines of a scenario's runs: when the (first) loader started after
 * the agreed start, and how long after the loader ended the last caller of each kind of process
 * settled (the process that ran the loader, and the others). Medians over the runs.
 */
function timing(runs: StampedeRun[]): { loaderStart: number; settleRunner: number; settleOthers: number } {
  const starts: number[] = [];
  const runner: number[] = [];
  const others: number[] = [];
  for (const run of runs) {
    const ran = run.timelines.filter((t) => t.loaderStart !== undefined);
    if (ran.length === 0) continue;
    starts.push(Math.min(...ran.map((t) => t.loaderStart!)));
    const end = Math.min(...ran.map((t) => t.loaderEnd!));
    runner.push(Math.max(...ran.map((t) => t.lastSettled! - t.loaderEnd!)));
    const rest = run.timelines.filter((t) => t.loaderStart === undefined);
    if (rest.length > 0) others.push(Math.max(...rest.map((t) => t.lastSettled! - end)));
  }
  return { loaderStart: median(starts), settleRunner: median(runner), settleOthers: median(others) };
}

// --- main -----------------------------------------------------------------------------------

export default async function coreBench(ctx: BenchContext): Promise<string> {
  const started = Date.now();
  const loadStart = os.loadavg()[0]!;
  const repeats = ctx.quick ? 1 : 3;
  const baseline = baselineFromEnv(process.env.CORE_BENCH_BASELINE);
  const list = contenders(baseline);
  // The baseline's contenders lengthen every repeat; the budgets grow with them.
  const budgetScale = baseline ? 1.25 : 1;
  if (baseline) ctx.log(`baseline: ${baseline.label} from ${baseline.dir}, against ${baseline.current}`);
  const redis: RedisServer = await startRedis();
  const fleets: Fleet[] = [];
  let control: Redis | undefined;
  let counter: CommandCounter | undefined;
  try {
    control = redis.client();
    const stampede = new Map<string, StampedeRun[]>();
    const mismatches: string[] = [];

    // Stampedes: 4 long-lived worker processes; a fresh contender instance (fresh connections,
    // warmed up on another key) in each process for every stampede.
    const workers = await Fleet.start('bench/scenarios/core.ts', 4, { url: redis.url, ...(baseline ? { baseline: baseline.dir } : {}) }, { nodeArgs: ['--expose-gc'], label: 'core worker', readyTimeoutMs: 30_000 });
    fleets.push(workers);
    counter = await CommandCounter.open(control);
    const only = (process.env.CORE_BENCH_ONLY ?? '').split(',').filter(Boolean);
    let stampedeRepeats = 0;
    for (let r = 0; r < repeats; r++) {
      if (r > 0 && Date.now() - started > STAMPEDE_BUDGET_S * budgetScale * (ctx.quick ? 0.3 : 1) * 1000) {
        ctx.log(`stampedes: time budget spent, stopping after ${r} repeats`);
        break;
      }
      stampedeRepeats++;
      // A different order in each repeat, so that no contender always runs first, last, or
      // right after the same other one.
      const order = STAMPEDE_ORDERS[r % STAMPEDE_ORDERS.length]!.flatMap((id) => list.stampede.filter((c) => c.id === id));
      for (const scenario of SCENARIOS) {
        for (const c of order) {
          if (only.length > 0 && !only.includes(c.id)) continue;
          const run = await runStampede(workers.members, control, counter, c.id, scenario, r);
          const id = `${scenario.id}:${c.id}`;
          stampede.set(id, [...(stampede.get(id) ?? []), run]);
          if (run.commands.monitorClient !== run.commands.client) {
            mismatches.push(`${id}#${r}: INFO ${run.commands.client} vs MONITOR ${run.commands.monitorClient}`);
          }
          ctx.log(
            `stampede ${scenario.id} #${r + 1} ${c.id}: ${run.loaderRuns} loader runs, p99 +${percentile(run.excess, 99).toFixed(1)} ms, ` +
              `${run.commands.client} commands (+${run.commands.inScripts} in scripts), per process ${run.perProcess.join(' / ')}, start skew ${run.startSkew.toFixed(1)} ms${run.errors ? `, ${run.errors} errors: ${run.errorSamples[0]}` : ''}`,
          );
        }
      }
    }
    counter.close();
    counter = undefined;
    await workers.close();
    const stampedeSeconds = (Date.now() - started) / 1000;

    // Hit path: one fresh worker process, contenders interleaved within each repeat.
    const hitStarted = Date.now();
    const hitFleet = await Fleet.start('bench/scenarios/core.ts', 1, { url: redis.url, ...(baseline ? { baseline: baseline.dir } : {}) }, { nodeArgs: ['--expose-gc'], label: 'core hit worker', readyTimeoutMs: 30_000 });
    fleets.push(hitFleet);
    const hitWorker = hitFleet.member(0);
    const request = (msg: { cmd: string } & Record<string, unknown>, event: string, timeoutMs: number) => (hitWorker.send(msg), hitWorker.take(event, timeoutMs));
    const setup = await request({ cmd: 'hitSetup', keys: HIT_KEYS }, 'hitReady', 60_000);
    const hits = new Map<string, number[]>();
    const ratios = new Map<string, number[]>();
    const plans = hitPlans(ctx.quick, list);
    await control.config('RESETSTAT');
    let hitRepeats = 0;
    for (let r = 0; r < repeats; r++) {
      if (r > 0 && Date.now() - started > TOTAL_BUDGET_S * budgetScale * (ctx.quick ? 0.3 : 1) * 1000) {
        ctx.log(`hit path: time budget spent, stopping after ${r} repeats`);
        break;
      }
      hitRepeats++;
      for (const plan of plans) {
        const res = await request({ ...plan, cmd: 'hitRound' }, 'hitResult', 120_000);
        for (const { id, ops, ms } of res.results as { id: string; ops: number; ms: number }[]) {
          const key = `${id}:${plan.mode}`;
          hits.set(key, [...(hits.get(key) ?? []), (ops / ms) * 1000]);
        }
        // Ratios within this repeat: against the baseline measured in the same interleaved round
        // (the in-memory in-flight round has no synchronous baseline: it uses this repeat's sequential one).
        const base = plan.group === 'redis' ? `raw-get:${plan.mode}` : 'raw-lru:seq';
        const baseValue = hits.get(base)?.[r];
        for (const id of plan.contenders) {
          const key = `${id}:${plan.mode}`;
          const value = hits.get(key)?.[r];
          if (value !== undefined && baseValue !== undefined) ratios.set(key, [...(ratios.get(key) ?? []), value / baseValue]);
        }
      }
      ctx.log(`hit path repeat ${r + 1}/${repeats} done`);
    }
    const serverStats = commandStats(String(await control.info('commandstats')));
    await hitFleet.close();
    const hitSeconds = (Date.now() - hitStarted) / 1000;

    return report({
      ctx,
      baseline,
      list,
      repeats: [stampedeRepeats, hitRepeats],
      stampede,
      hits,
      ratios,
      valueBytes: Number(setup.bytes),
      mismatches,
      stampedeSeconds,
      hitSeconds,
      plans,
      serverStats,
      load: [loadStart, os.loadavg()[0]!],
    });
  } finally {
    counter?.close();
    await Promise.all(fleets.map((f) => f.close()));
    control?.disconnect();
    await redis.stop();
  }
}

interface ReportInput {
  ctx: BenchContext;
  baseline: Baseline | undefined;
  list: Contenders;
  /** Repeats done: stampedes, hit path. */
  repeats: [number, number];
  stampede: Map<string, StampedeRun[]>;
  hits: Map<string, number[]>;
  /** Per repeat: contender ÷ baseline of the same interleaved measurement. */
  ratios: Map<string, number[]>;
  valueBytes: number;
  mismatches: string[];
  stampedeSeconds: number;
  hitSeconds: number;
  plans: HitPlan[];
  serverStats: Record<string, number>;
  load: [number, number];
}

/**
 * "current vs baseline": per measurement, the medians of both and the median over the repeats
 * of current ÷ baseline taken within each repeat (both ran in the same repeat, interleaved).
 */
function baselineTable(baseline: Baseline, stampede: Map<string, StampedeRun[]>, hits: Map<string, number[]>): string[] {
  const rows: { name: string; unit: string; better: 'lower' | 'higher'; current: number[]; base: number[] }[] = [];
  const stampedeRows: [string, string, (r: StampedeRun) => number][] = [
    ['loader runs', '', (r) => r.loaderRuns],
    ['excess p50', ' ms', (r) => percentile(r.excess, 50)],
    ['excess p99', ' ms', (r) => percentile(r.excess, 99)],
    ['excess max', ' ms', (r) => Math.max(...r.excess)],
    ['Redis commands', '', (r) => r.commands.client],
    ['Redis commands run, inside scripts too', '', (r) => r.commands.client + r.commands.inScripts],
  ];
  for (const scenario of SCENARIOS) {
    const current = stampede.get(`${scenario.id}:dogpile`) ?? [];
    const base = stampede.get(`${scenario.id}:dogpile@baseline`) ?? [];
    for (const [what, unit, f] of stampedeRows) {
      rows.push({ name: `Stampede ${scenario.id} (${scenario.processes} × ${scenario.callers}): ${what}`, unit, better: 'lower', current: current.map(f), base: base.map(f) });
    }
  }
  const hitRows: [string, string, HitMode][] = [
    ['Redis hit, sequential', 'dogpile', 'seq'],
    ['Redis hit, 100 in flight, 1 key', 'dogpile', 'inflight-same'],
    ['Redis hit, 100 in flight, 100 keys', 'dogpile', 'inflight-distinct'],
    ['Redis hit, JSON, 100 in flight, 100 keys', 'dogpile-json', 'inflight-distinct'],
    ['L1 hit, sequential', 'dogpile-l1', 'seq'],
    ['L1 hit, 100 in flight', 'dogpile-l1', 'inflight-distinct'],
    ['embedded hit, sequential', 'dogpile-embedded', 'seq'],
    ['embedded hit, 100 in flight', 'dogpile-embedded', 'inflight-distinct'],
    ['embedded hit, options object, sequential', 'dogpile-embedded-options', 'seq'],
  ];
  for (const [name, id, mode] of hitRows) {
    const k = (v: number[] | undefined) => (v ?? []).map((x) => x / 1000);
    rows.push({ name, unit: ' k ops/s', better: 'higher', current: k(hits.get(`${id}:${mode}`)), base: k(hits.get(`${id}@baseline:${mode}`)) });
  }
  const out = [
    `### Current vs baseline: ${baseline.current} against ${baseline.label}`,
    '',
    `The baseline is dogpile-guard built from \`${baseline.dir}/src/index.ts\` (run by tsx, same node_modules), measured in this run ` +
      'next to the current code: in the stampedes (in each repeat right before or after the current one, both fresh instances on fresh keys) ' +
      'and in the hit-path rounds (one more contender in the same interleaved slices; its Redis values under its own prefix, as many bytes as ours). ' +
      'Ratio: current ÷ baseline within each repeat, median over the repeats [min–max]; for latencies and counts below 1× means the current code is ' +
      'lower, for reads per second above 1× means it is faster. Excess p50 is a few milliseconds at most, so its ratio swings widely.',
    '',
    '| measurement | current | baseline | current ÷ baseline | better |',
    '|---|---:|---:|---:|---|',
  ];
  for (const row of rows) {
    const n = Math.min(row.current.length, row.base.length);
    const ratios = Array.from({ length: n }, (_, i) => row.current[i]! / row.base[i]!).filter((v) => Number.isFinite(v));
    const f = (v: number) => `${v.toFixed(2)}×`;
    const cell =
      ratios.length === 0 ? 'n/a' : ratios.length === 1 ? f(ratios[0]!) : `${f(median(ratios))} [${f(Math.min(...ratios))}–${f(Math.max(...ratios))}]`;
    const digits = row.unit === '' ? 0 : 1;
    out.push(`| ${row.name} | ${summary(row.current, digits)}${row.unit} | ${summary(row.base, digits)}${row.unit} | ${cell} | ${row.better} |`);
  }
  return out;
}

/** usec_per_call per command from `INFO commandstats`. */
function commandStats(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=\d+,usec=\d+,usec_per_call=([\d.]+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

function report(input: ReportInput): string {
  const { repeats, stampede, hits, ratios } = input;
  const rat = (id: string, mode: HitMode) => median(ratios.get(`${id}:${mode}`) ?? []);
  const ratCell = (id: string, mode: HitMode) => {
    const values = ratios.get(`${id}:${mode}`) ?? [];
    if (values.length === 0) return 'n/a';
    const f = (v: number) => `${v.toFixed(2)}×`;
    return values.length === 1 ? f(values[0]!) : `${f(median(values))} [${f(Math.min(...values))}–${f(Math.max(...values))}]`;
  };
  const out: string[] = [];
  const hitMed = (id: string, mode: HitMode) => median(hits.get(`${id}:${mode}`) ?? []);
  const redisPlan = (mode: HitMode) => input.plans.find((p) => p.group === 'redis' && p.mode === mode)!;
  const seqOps = (redisPlan('seq').opsPerSlice ?? 0) * redisPlan('seq').slices;
  const flightOps = (redisPlan('inflight-same').opsPerSlice ?? 0) * redisPlan('inflight-same').slices;
  const memPlan = input.plans.find((p) => p.group === 'memory')!;
  const usec = (cmd: string) => input.serverStats[cmd];
  const skews = input.list.stampede.flatMap((c) => stampede.get(`A:${c.id}`) ?? []).map((r) => r.startSkew);

  out.push('## Cache core: stampede and hit path (`bench/core.bench.ts`)');
  out.push('');
  out.push(`Command: \`${input.baseline ? `CORE_BENCH_BASELINE=<a checkout of ${input.baseline.label.replace(/^.*\((.*)\)$/, '$1')}> ` : ''}npm run bench -- core\`${input.ctx.quick ? ' with BENCH_QUICK=1' : ''}.`);
  out.push('');
  out.push(
    `Every contender in one run against one throwaway Redis; stampedes repeated ${repeats[0]}×, hit-path measurements ${repeats[1]}× ` +
      `(contenders interleaved)${input.ctx.quick ? ' — a quick run (BENCH_QUICK=1)' : ''}; ` +
      `medians over the repeats with min–max in brackets. The stampedes took ${input.stampedeSeconds.toFixed(0)} s, the hit path ` +
      `${input.hitSeconds.toFixed(0)} s. The machine was shared with other work: 1-minute load average ${input.load[0].toFixed(1)} at the start ` +
      `and ${input.load[1].toFixed(1)} at the end on ${os.cpus().length} CPUs, so single runs are noisy — compare contenders within a table, not across runs.`,
  );
  out.push('');
  out.push('**Stampede setup.**');
  out.push('');
  out.push(
    '- Every caller asks for the same cold key at once: the processes agree on a start time and spin to it, and each fires all its callers in one tick ' +
      `(in A, the last process started a median ${median(skews).toFixed(1)} ms after the first, at most ${Math.max(...skews).toFixed(1)} ms). The loader is a 100 ms \`setTimeout\` ` +
      'returning a ~250-byte object; its runs are counted with an `INCR` on a separate counter key over a separate connection.\n' +
      '- Each contender gets a new key per repeat and a fresh instance in every process, its connections opened and warmed up on another key ' +
      'before the stampede (the numbers are those of a running application, not of a cold start); every process collects garbage ' +
      'before each stampede, and the contenders run in a different order in each repeat.\n' +
      "- *Excess* is a caller's own latency (from its call to the moment its promise settles) minus the loader's 100 ms, over every caller of the " +
      'stampede. A process that starts late against a leader in another process can see a negative excess.\n' +
      '- dogpile-guard: `createCache({ redis })`, defaults (lockTtl 5 s). No protection: `GET`; on a miss load and `SET … PX`. ' +
      "async-cache-dedupe 3.4: `createCache({ ttl, storage: { type: 'redis', options: { client } } }).define(…)`. bentocache 1.6: " +
      '`bentostore().useL1Layer(memoryDriver()).useL2Layer(redisDriver({ connection }))`, `getOrSet` with its default stampede protection (no bus). ' +
      'cache-manager 7.2: `createCache({ stores: [new Keyv({ store: new KeyvRedis(url) })] })`, `wrap(key, fn, ttl)`.\n' +
      '- redlock 4.2.0 and redis-semaphore 5.8 `Mutex`: cache-aside guarded by the lock — `GET`; on a miss lock → `GET` again → load → `SET` → ' +
      'unlock; lock TTL 5 s. redlock keeps its default retryDelay (200 ms) and retryJitter (100 ms) with retryCount raised from 10 to 100 so that ' +
      'no caller gives up; the Mutex keeps its defaults (retryInterval 10 ms, acquireTimeout 10 s).',
  );
  out.push('');
  out.push(
    '**Counting Redis commands.** `INFO commandstats` is read on a control connection before and after each stampede. Redis 7 also counts ' +
      'the commands that Lua scripts run, so a `MONITOR` connection records the window, and the commands whose source is `lua` are subtracted: ' +
      'an `EVAL`/`EVALSHA` counts as one client command and what it runs inside does not (listed as *in scripts*). Also subtracted: the first ' +
      "`INFO` (it falls inside the window) and the benchmark's own counter `INCR`s. What is left is every command the contender's clients sent, " +
      'including connection set-up that happens during the stampede (such as the ready-check `INFO` of a subscriber connection opened on the ' +
      'first wait) and trailing commands up to 100 ms after the last caller settled. The INFO-based client count was cross-checked against ' +
      `MONITOR's own count: ${input.mismatches.length === 0 ? 'equal in every stampede' : `they differed in ${input.mismatches.join('; ')}`}.`,
  );

  for (const scenario of SCENARIOS) {
    out.push('');
    out.push(`### ${scenario.title}, cold key, loader 100 ms`);
    out.push('');
    out.push('| contender | coordinates | loader runs | excess p50 (ms) | excess p99 (ms) | excess max (ms) | Redis commands | per process | in scripts | client commands (median run) | errors |');
    out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|');
    for (const c of input.list.stampede) {
      const runs = stampede.get(`${scenario.id}:${c.id}`) ?? [];
      if (runs.length === 0) continue;
      const s = stampedeStats(runs);
      out.push(
        `| ${c.name} | ${c.scope} | ${int(s.runs)} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${int(s.commands)} | ` +
          `${summary(s.commands.map((v) => v / scenario.processes), 1)} | ${int(s.inScripts)} | ${fmtByName(medianRun(runs).commands.byName)} | ${s.errors} |`,
      );
    }
  }

  out.push('');
  const dogpileA = stampede.get('A:dogpile') ?? [];
  if (dogpileA.length > 0) out.push('', ...commandsPerProcess(medianRun(dogpileA), SCENARIOS[0].processes));
  out.push('');
  out.push('### dogpile-guard against each peer (stampedes)');
  out.push('');
  out.push(
    "Peer ÷ dogpile-guard on the medians above: above 1× the peer is slower (p99 excess) or sends more commands; loader runs are the peer's vs dogpile-guard's.",
  );
  out.push('');
  out.push('| peer | A: loader runs | A: p99 excess | A: commands | B: loader runs | B: p99 excess | B: commands |');
  out.push('|---|---:|---:|---:|---:|---:|---:|');
  const med = (scenario: string, id: string) => stampedeStats(stampede.get(`${scenario}:${id}`) ?? []);
  const dA = med('A', 'dogpile');
  const dB = med('B', 'dogpile');
  for (const c of STAMPEDE.filter((x) => x.id !== 'dogpile')) {
    const pA = med('A', c.id);
    const pB = med('B', c.id);
    out.push(
      `| ${c.name} | ${median(pA.runs)} vs ${median(dA.runs)} | ${ratio(median(pA.p99), median(dA.p99))} | ${ratio(median(pA.commands), median(dA.commands))} | ` +
        `${median(pB.runs)} vs ${median(dB.runs)} | ${ratio(median(pB.p99), median(dB.p99))} | ${ratio(median(pB.commands), median(dB.commands))} |`,
    );
  }

  out.push('');
  out.push('### Hit path: warm key, reads per second');
  out.push('');
  out.push(
    `The value is the stampede's ~250-byte object (${input.valueBytes} bytes as dogpile-guard stores it: the entry header (format 4: times, Δ, the serializer's name) + the default serializer's bytes); ` +
      `the raw baselines read exactly those bytes (\`getBuffer\` of dogpile-guard's Redis key, no deserialisation) and that object (lru-cache). ` +
      `Redis-backed: ${seqOps.toLocaleString('en')} sequential reads per contender, and ${flightOps.toLocaleString('en')} reads kept 100 in flight — on one key ` +
      `(in-process single-flight may merge concurrent reads of one key) and on ${HIT_KEYS} keys, one per in-flight lane (nothing can be merged: the ` +
      `per-read cost), in ${redisPlan('seq').slices} slices per contender; in memory: ${memPlan.slices} slices of ${memPlan.sliceMs} ms per contender. ` +
      'After a warm-up the contenders of one measurement take turns slice by slice, in one process, so they see the same machine load. ' +
      'Ratios are taken within each repeat against the baseline of the same measurement (in-memory in-flight rows: against the sequential ' +
      'synchronous baseline), then the median over the repeats.',
  );
  out.push('');
  out.push('| Redis-backed | sequential (k ops/s) | vs raw GET | 100 in flight, 1 key (k ops/s) | vs raw GET | 100 in flight, 100 keys (k ops/s) | vs raw GET |');
  out.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const c of input.list.hitRedis) {
    const cells = (['seq', 'inflight-same', 'inflight-distinct'] as const).map((m) => `${kops(hits.get(`${c.id}:${m}`) ?? [])} | ${ratCell(c.id, m)}`);
    out.push(`| ${c.name} | ${cells.join(' | ')} |`);
  }
  out.push('');
  out.push('| in memory | sequential (k ops/s) | vs raw lru-cache `get` | 100 in flight (k ops/s) | vs raw lru-cache `get` |');
  out.push('|---|---:|---:|---:|---:|');
  for (const c of input.list.hitMemory) {
    const seq = `${kops(hits.get(`${c.id}:seq`) ?? [])} | ${ratCell(c.id, 'seq')}`;
    const flight = c.id === 'raw-lru' ? '— | —' : `${kops(hits.get(`${c.id}:inflight-distinct`) ?? [])} | ${ratCell(c.id, 'inflight-distinct')}`;
    out.push(`| ${c.name} | ${seq} | ${flight} |`);
  }
  out.push('');
  out.push(
    `Redis's own time per call during the hit path (\`INFO commandstats\` usec_per_call): \`GET\` ${usec('get')?.toFixed(2) ?? 'n/a'} µs, ` +
      `\`EVALSHA\` of the lookup script ${usec('evalsha')?.toFixed(2) ?? 'n/a'} µs.`,
  );
  if (input.baseline) out.push('', ...baselineTable(input.baseline, stampede, hits));

  // Targets.
  const redisSeq = rat('dogpile', 'seq');
  const redisSame = rat('dogpile', 'inflight-same');
  const redisDistinct = rat('dogpile', 'inflight-distinct');
  const l1Seq = rat('dogpile-l1', 'seq');
  const l1Async = hitMed('dogpile-l1', 'seq') / hitMed('async-lru', 'seq');
  const asyncFloor = rat('async-lru', 'seq');
  const verdict = (ok: boolean) => (ok ? '**met**' : '**missed**');
  const peersFor = STAMPEDE.filter((c) => c.id !== 'dogpile' && c.id !== 'none');
  const lowerAt = (d: StampedeStats, scenario: string) =>
    peersFor.filter((c) => median(d.p99) > median(med(scenario, c.id).p99)).map((c) => `${c.id} ${ms(med(scenario, c.id).p99)} ms`);
  const lowerA = lowerAt(dA, 'A');
  const lowerB = lowerAt(dB, 'B');
  out.push('');
  out.push('### Against the targets of issue 3');
  out.push('');
  out.push(
    `- **One loader run** — ${verdict(dA.runs.every((n) => n === 1) && dB.runs.every((n) => n === 1))}: dogpile-guard ran the loader ` +
      `${int(dA.runs)} time(s) in A, where the in-process peers ran it once per process (${peersFor
        .filter((c) => c.scope === 'in-process')
        .map((c) => `${c.id} ${int(med('A', c.id).runs)}`)
        .join(', ')}), and ${int(dB.runs)} in B.`,
  );
  out.push(
    `- **p99 excess no worse than the peers' in the same run** — A: ${verdict(lowerA.length === 0)}, dogpile-guard ${ms(dA.p99)} ms` +
      `${lowerA.length ? ` (lower: ${lowerA.join(', ')})` : ''}; B: ${verdict(lowerB.length === 0)}, dogpile-guard ${ms(dB.p99)} ms` +
      `${lowerB.length ? ` (lower: ${lowerB.join(', ')})` : ''}. Against the cross-process peers: ` +
      `redlock ${ratio(median(med('A', 'redlock').p99), median(dA.p99), 0)} / ${ratio(median(med('B', 'redlock').p99), median(dB.p99), 0)} and ` +
      `redis-semaphore ${ratio(median(med('A', 'semaphore').p99), median(dA.p99), 0)} / ${ratio(median(med('B', 'semaphore').p99), median(dB.p99), 0)} ` +
      'dogpile-guard\'s p99 (A / B).',
  );
  out.push(
    `- **A few Redis commands per process, flat in the number of callers** — **met**: A ${summary(dA.commands.map((v) => v / 4), 1)} per process ` +
      `(${int(dA.commands)} for 200 callers in 4 processes), B ${int(dB.commands)} for 200 callers in one process.`,
  );
  out.push(
    `- **Redis hits ≥ 0.9× raw GET** — sequential ${redisSeq.toFixed(2)}× ${verdict(redisSeq >= 0.9)}; 100 in flight on 100 keys ` +
      `${redisDistinct.toFixed(2)}× ${verdict(redisDistinct >= 0.9)}; 100 in flight on one key ${redisSame.toFixed(2)}× ${verdict(redisSame >= 0.9)} ` +
      '(there single-flight merges concurrent reads of the key, which says nothing about the cost of one read).',
  );
  out.push(
    `- **L1 hits ≥ 0.5× raw lru-cache** — ${verdict(l1Seq >= 0.5)}: sequential ${l1Seq.toFixed(2)}× a synchronous \`lru.get\`, ` +
      `${l1Async.toFixed(2)}× an awaited \`lru.get\` in an async function — which itself reaches only ${asyncFloor.toFixed(2)}× the synchronous one.`,
  );
  out.push('');
  out.push(
    explanations({
      dA,
      dB,
      peersA: peersFor
        .filter((c) => c.scope === 'in-process')
        .map((c) => `${c.id} ${median(med('A', c.id).p99).toFixed(1)} ms`)
        .join(', '),
      peersB: peersFor
        .filter((c) => c.scope === 'in-process')
        .map((c) => `${c.id} ${ms(med('B', c.id).p99)} ms`)
        .join(', '),
      overlapB: peersFor
        .filter((c) => c.scope === 'in-process')
        .some((c) => Math.min(...dB.p99) <= Math.max(...med('B', c.id).p99) && Math.min(...med('B', c.id).p99) <= Math.max(...dB.p99)),
      tDog: timing(stampede.get('A:dogpile') ?? []),
      tPeers: peersFor
        .filter((c) => c.scope === 'in-process')
        .map((c) => `${c.id} ${timing(stampede.get(`A:${c.id}`) ?? []).loaderStart.toFixed(1)} ms`)
        .join(', '),
      tPeersEnd: peersFor
        .filter((c) => c.scope === 'in-process')
        .map((c) => `${c.id} ${timing(stampede.get(`A:${c.id}`) ?? []).settleRunner.toFixed(1)} ms`)
        .join(', '),
      usecGet: usec('get'),
      usecEval: usec('evalsha'),
      lookupRatio: rat('raw-lookup', 'inflight-distinct'),
      v8Ratio: rat('raw-get-v8', 'inflight-distinct'),
      jsonVsV8: rat('dogpile-json', 'inflight-distinct') / rat('dogpile', 'inflight-distinct'),
      asyncFloor,
    }),
  );
  return out.join('\n');
}

/**
 * Why the numbers come out as they do: from reading src/, from MONITOR traces of single
 * stampedes, and from CPU profiles (`node --cpu-prof`) of hit loops on the machine of the run.
 */
function explanations(v: {
  dA: StampedeStats;
  dB: StampedeStats;
  peersA: string;
  peersB: string;
  overlapB: boolean;
  tDog: { loaderStart: number; settleRunner: number; settleOthers: number };
  tPeers: string;
  tPeersEnd: string;
  usecGet: number | undefined;
  usecEval: number | undefined;
  lookupRatio: number;
  v8Ratio: number;
  jsonVsV8: number;
  asyncFloor: number;
}): string {
  const u = (x: number | undefined) => (x === undefined ? 'n/a' : x.toFixed(1));
  return `### Why

**Stampede A latency.** dogpile-guard makes the fewest round trips a cross-process protocol can: the leader sends 2 commands (lookup-or-lead, store-release-announce), a waiting process 3 (lookup, \`SUBSCRIBE\`, lookup again; its \`UNSUBSCRIBE\` follows a second after the last waiter, outside the measured window); nothing polls. The table above names every one of them and what it runs inside Redis. Where its p99 excess in A is above an in-process peer's (${ms(v.dA.p99)} ms, against ${v.peersA}), the difference is therefore not round trips but waiting for a CPU: 4 worker processes, Redis and the coordinating process share ${os.cpus().length} CPUs here, with other work. The per-process timelines (loader start and end, first and last caller settled, against the agreed start) show two moments at which dogpile-guard's processes must all run at once and the in-process peers' need not:
- at the start, the three waiting processes get their *wait* answer and open their subscriber connection while the leader needs the CPU to start its loader: in this run the leader's loader started ${v.tDog.loaderStart.toFixed(1)} ms after the agreed start (median over the repeats), the in-process peers' first loaders after ${v.tPeers};
- at the end, one \`PUBLISH\` wakes all four processes in the same millisecond and they queue for the CPUs: the last caller of the leader's process settled ${v.tDog.settleRunner.toFixed(1)} ms after its loader ended, the last caller of the waiting processes ${v.tDog.settleOthers.toFixed(1)} ms after it (the in-process peers, whose processes each finish after their own loader at slightly different moments: ${v.tPeersEnd}).

On hardware with a core per process these effects should shrink to a round trip; this run cannot show that. In stampede B (one process, so no cross-process wake-up) the leader path is the same two round trips as the peers' (the lookup script instead of \`GET\`, the store script instead of \`SET\`): dogpile-guard's p99 was ${ms(v.dB.p99)} ms against ${v.peersB}; ${v.overlapB ? 'the ranges over the repeats overlap, so this run does not separate them' : 'the ranges over the repeats do not overlap'}.

**Redis hits (target ≥ 0.9× raw GET).** A hit on a key the process has seen is one plain \`GET\` (the cache remembers when the values it has seen expire; only an unknown or expired key goes to the lookup-or-lead script, which Redis ran at ${u(v.usecEval)} µs per call against ${u(v.usecGet)} µs per \`GET\` in this run). What separates it from a bare \`getBuffer\` is client CPU, not round trips:
1. *Deserialisation.* The default \`v8Serializer\` calls \`v8.deserialize\`, which builds a \`DefaultDeserializer\` per call; raw \`getBuffer\` + \`v8.deserialize\` alone reaches ${v.v8Ratio.toFixed(2)}× raw GET (100 in flight, 100 keys), the ceiling for any cache storing v8-serialised values. With \`jsonSerializer\` dogpile-guard reads at ${v.jsonVsV8.toFixed(2)}× its v8 speed (100 in flight, 100 keys).
2. *Per-call work in src/core/cache.ts*: the fast path in \`getOrCompute\` checks the freshness hint (an lru-cache lookup), bounds the \`GET\` by \`commandTimeout\` (a promise registered with one shared sweep timer), shares the read with concurrent readers of the key, and decodes the 20-byte entry header.

With 100 reads in flight the Node process is CPU-bound, and a raw \`getBuffer\` costs little more than its socket write, so every microsecond of client work shows. The diagnostic rows bound what is reachable: a \`GET\` plus the default deserialisation, and nothing else, came to ${v.v8Ratio.toFixed(2)}× (100 in flight, 100 keys)${v.v8Ratio < 0.9 ? ' — below 0.9× before any cache logic, so with the v8 serializer the in-flight target cannot be met against a baseline that does not deserialise' : ''}; dogpile-guard's distance below that row is the script and its per-call work.

**L1 hits (target ≥ 0.5× raw lru-cache).** An L1 or embedded hit is answered without any \`async\` function: \`getOrCompute\` checks its arguments, reads the lru-cache synchronously and returns \`Promise.resolve(value)\`. The caller still awaits a promise, and an awaited \`lru.get\` in an async function is itself only ${v.asyncFloor.toFixed(2)}× a synchronous \`lru.get\` on this machine: no promise-returning API can reach 0.5× of a synchronous get; the measured ratio against the awaited get is in the targets list above.
`;
}
