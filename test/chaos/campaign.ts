/**
 * One chaos run (a history): the cache's Redis (a throwaway server or cluster, which the
 * nemesis attacks) and a "database" server (left alone), `workers` worker processes (Node,
 * Bun or Deno), the nemesis, then the checker. And a campaign: runs one after another for a
 * given time.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { NodeChild, npxBinary, root } from '../../tools/child-process.js';
import { RedisServer } from '../../tools/redis-server.js';
import { cacheRedis } from './cache-redis.js';
import { sleep } from '../../tools/basics.js';
import { opBound } from './bounds.js';
import { check, type Violation } from './checker.js';
import { DEFAULT_RUN_MS, DEFAULT_WORKERS, faultSchedule, runConfig, type RunShape } from './config.js';
import { now, FAULT_KINDS, type FaultKind, type History, type LoaderRun, type Op, type RunConfig, type Runtime } from './history.js';
import { runNemesis, type WorkerPool } from './nemesis.js';

type Message = Record<string, any> & { event: string };

class WorkerChild extends NodeChild {
  onMessage: (m: Message) => void = () => {};
  stopping = false;
  protected override onLine(line: string): void {
    let m: Message;
    try {
      m = JSON.parse(line) as Message;
    } catch {
      return;
    }
    this.onMessage(m);
  }
}

export interface RunResult {
  history: History;
  violations: Violation[];
  /** Where the history was written (only when it has violations, or when asked). */
  file?: string;
}

export function replayCommand(seed: number, shape: RunShape): string {
  const extra = [
    shape.workers !== DEFAULT_WORKERS ? ` --workers ${shape.workers}` : '',
    shape.durationMs !== DEFAULT_RUN_MS ? ` --run-seconds ${shape.durationMs / 1000}` : '',
    shape.topology === undefined ? '' : ` --topology ${shape.topology}`,
    shape.runtimes === undefined ? '' : ` --runtimes ${shape.runtimes.join(',')}`,
  ].join('');
  return `npm run chaos -- --seed ${seed}${extra}`;
}

const binaries = new Map<Runtime, string>();

/** The executable of `runtime`: this Node, or Bun or Deno from their npm packages (looked up once). */
export function runtimeBinary(runtime: Runtime): string {
  if (runtime === 'node') return process.execPath;
  let binary = binaries.get(runtime);
  if (binary === undefined) {
    binary = npxBinary(runtime);
    binaries.set(runtime, binary);
  }
  return binary;
}

/**
 * The arguments that run the worker under `runtime`, with `clock-shift.mjs` loaded first when
 * its wall clock is shifted. Bun and Deno run the TypeScript sources themselves (Deno with
 * --sloppy-imports: the sources import './x.js' for './x.ts').
 */
function workerArgv(runtime: Runtime, shifted: boolean, arg: string): string[] {
  const worker = path.join(root, 'test/chaos/worker.ts');
  const shift = path.join(root, 'test/chaos/clock-shift.mjs');
  switch (runtime) {
    case 'node':
      return [...(shifted ? ['--import', shift] : []), '--import', 'tsx', worker, arg];
    case 'bun':
      return [...(shifted ? ['--preload', shift] : []), worker, arg];
    case 'deno':
      return ['run', '-A', '--sloppy-imports', ...(shifted ? ['--preload', shift] : []), worker, arg];
  }
}

export async function runHistory(seed: number, shape: RunShape, log: (line: string) => void = () => {}, keep = false): Promise<RunResult> {
  const began = now();
  const config = runConfig(seed, shape);
  const schedule = faultSchedule(seed, shape);
  const cache = cacheRedis(config.topology ?? 'single');
  const dbRedis = new RedisServer();
  const runtimes = config.runtimes ?? [];
  for (const runtime of new Set(runtimes)) runtimeBinary(runtime);
  const ops = new Map<string, Op>();
  const runs = new Map<string, LoaderRun>();
  const history: History = { seed, config, schedule, start: 0, end: 0, ops: [], runs: [], hung: [], backendErrors: [], faults: [], crashes: [], finalVersions: {} };
  const children = new Map<number, WorkerChild>();
  const incarnations = new Map<number, number>();

  const spawn = (index: number, waitForGo = false): Promise<void> => {
    const incarnation = (incarnations.get(index) ?? -1) + 1;
    incarnations.set(index, incarnation);
    const shift = config.clockShift?.worker === index ? config.clockShift.ms : 0;
    const runtime = runtimes[index] ?? 'node';
    const argv = workerArgv(runtime, shift !== 0, JSON.stringify({ worker: index, incarnation, cache: cache.address(), dbUrl: dbRedis.url, config, waitForGo }));
    const child = new WorkerChild(`chaos worker ${index}.${incarnation}`, argv, { command: runtimeBinary(runtime), env: { ...process.env, CHAOS_CLOCK_SHIFT_MS: String(shift) } });
    children.set(index, child);
    let ready: () => void = () => {};
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    child.onMessage = (m) => {
      // The worker runs where it was asked to, with the wall clock it was given (within 1 s).
      if (m.event === 'ready' && (m.runtime !== runtime || Math.abs(m.wallClockOffset - shift) > 1000)) {
        history.crashes.push({ worker: index, at: now(), detail: `started as ${m.runtime} with its wall clock off by ${Math.round(m.wallClockOffset)} ms; asked: ${runtime}, ${shift} ms` });
      }
      handle(index, m, ready);
    };
    void child.exited.then((exit) => {
      ready();
      if (!child.stopping) history.crashes.push({ worker: index, at: now(), detail: `exit ${exit.code ?? exit.signal}; ${child.stderr.slice(-1500)}` });
    });
    return isReady;
  };

  const handle = (index: number, m: Message, ready: () => void) => {
    switch (m.event) {
      case 'ready':
        ready();
        break;
      case 'op-begin':
      case 'op':
        ops.set(m.op.id, { ...ops.get(m.op.id), ...m.op });
        break;
      case 'lock-acquired': {
        const op = ops.get(m.id);
        if (op?.kind === 'lock') Object.assign(op, { token: m.token, acquiredAt: m.acquiredAt });
        break;
      }
      case 'load-start':
        runs.set(m.run, { run: m.run, worker: index, key: m.key, start: m.at, mode: m.mode });
        break;
      case 'load-end': {
        const run = runs.get(m.run);
        if (run) Object.assign(run, { end: m.at, ok: m.ok, ...(m.version === undefined ? {} : { version: m.version }) });
        break;
      }
      case 'backend-error':
        history.backendErrors.push({ worker: index, at: m.at });
        break;
      case 'hung':
        history.hung.push(m.op);
        break;
      case 'fatal':
      case 'unhandled-rejection':
        history.crashes.push({ worker: index, at: now(), detail: `${m.event}: ${m.message}` });
        break;
    }
  };

  const pool: WorkerPool = {
    live: () => [...children].filter(([, c]) => c.running).map(([i]) => i),
    inLoader: () => {
      const busy = new Set<number>();
      for (const run of runs.values()) if (run.end === undefined && children.get(run.worker)?.running) busy.add(run.worker);
      return [...busy];
    },
    killAndRespawn: async (index) => {
      const child = children.get(index);
      if (child) {
        child.stopping = true;
        await child.dispose();
      }
      await spawn(index);
    },
    loaderMode: (index, mode) => {
      const child = children.get(index);
      if (child?.running) child.write(`${JSON.stringify({ cmd: 'loader', mode })}\n`);
    },
  };

  try {
    await cache.start();
    await dbRedis.start();
    await Promise.all(Array.from({ length: shape.workers }, (_, i) => spawn(i, true)));
    history.start = now();
    for (const child of children.values()) child.write(`${JSON.stringify({ cmd: 'go' })}\n`);
    if (config.clockShift) history.faults.push({ kind: 'clockShift', start: history.start, end: history.start, worker: config.clockShift.worker, shiftMs: config.clockShift.ms });
    log(`seed ${seed}: ${describeConfig(config)}; ${schedule.length} faults scheduled`);
    const nemesis = runNemesis(schedule, history.start, cache, pool, history.faults);
    await sleep(shape.durationMs);
    await nemesis;
    history.end = now();
    log(`seed ${seed}: workers started in ${Math.round(history.start - began)} ms; stopping`);
    const longest = Math.max(...(['read', 'get', 'set', 'delete', 'invalidate', 'lock'] as const).map((k) => opBound(k, config)));
    await Promise.all(
      [...children.values()].map(async (child) => {
        if (!child.running) return;
        child.stopping = true;
        child.write(`${JSON.stringify({ cmd: 'stop' })}\n`);
        const exit = await child.stop('SIGCONT', longest + 10_000).catch(() => undefined);
        if (exit?.code !== 0) history.crashes.push({ worker: Number(child.label.split(' ')[2]), at: now(), detail: `did not stop cleanly (${exit?.code ?? exit?.signal}); ${child.stderr.slice(-1500)}` });
      }),
    );
    const flat = (await dbRedis.command('HGETALL', 'db')) as string[];
    for (let i = 0; i < flat.length; i += 2) history.finalVersions[flat[i]!] = Number(flat[i + 1]);
  } finally {
    for (const child of children.values()) {
      child.stopping = true;
      await child.dispose();
    }
    await cache.stop();
    await dbRedis.stop();
  }
  log(`seed ${seed}: stopped in ${Math.round(now() - history.end)} ms`);
  history.ops = [...ops.values()];
  history.runs = [...runs.values()];
  const violations = check(history);
  const result: RunResult = { history, violations };
  if (violations.length > 0 || keep) result.file = writeHistory(history, violations, shape);
  return result;
}

export function writeHistory(history: History, violations: Violation[], shape: RunShape): string {
  const dir = path.join(root, '.tmp');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `chaos-${history.seed}.json`);
  writeFileSync(file, JSON.stringify({ replay: replayCommand(history.seed, shape), violations, ...history }, null, 1));
  return file;
}

export function describeConfig(c: RunConfig): string {
  const runtimes = c.runtimes ?? [];
  return [
    c.topology === 'cluster' ? 'cluster (3 masters, 3 replicas)' : 'single server',
    runtimes.some((r) => r !== 'node') ? `${c.workers} workers (${runtimes.join(', ')})` : `${c.workers} workers`,
    `${c.keys.length} keys`,
    `ttl ${c.ttl}`,
    `l1 ${c.l1 ? 'on' : 'off'}`,
    `swr ${c.staleWhileRevalidate}`,
    `sie ${c.staleIfError}`,
    `lockTtl ${c.lockTtl}`,
    `waitTimeout ${c.waitTimeout}`,
    `commandTimeout ${c.commandTimeout}`,
    c.hardTimeout === undefined ? 'no hardTimeout' : `hardTimeout ${c.hardTimeout}`,
    c.clockShift ? `worker ${c.clockShift.worker} clock ${c.clockShift.ms > 0 ? '+' : ''}${c.clockShift.ms} ms` : 'clocks agree',
  ].join(', ');
}

export interface CampaignOptions {
  seed: number;
  /** Run histories until this much time has passed (at least one). */
  minutes?: number;
  /** Exactly this many histories (a replay: 1). */
  histories?: number;
  shape: RunShape;
  log?: (line: string) => void;
  /** Write every history to `.tmp/chaos-<seed>.json`, not only those with violations. */
  keep?: boolean;
}

export interface CampaignSummary {
  histories: number;
  ops: number;
  loaderRuns: number;
  faults: Record<FaultKind, number>;
  failed: { seed: number; violations: Violation[]; file?: string; replay: string }[];
}

/** Histories with seeds `seed`, `seed + 1`, ... one after another. */
export async function runCampaign(options: CampaignOptions): Promise<CampaignSummary> {
  const log = options.log ?? (() => {});
  const summary: CampaignSummary = { histories: 0, ops: 0, loaderRuns: 0, faults: Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>, failed: [] };
  const deadline = performance.now() + (options.minutes ?? 0) * 60_000;
  for (let i = 0; ; i++) {
    if (options.histories !== undefined ? i >= options.histories : i > 0 && performance.now() >= deadline) break;
    const seed = (options.seed + i) >>> 0;
    const { history, violations, file } = await runHistory(seed, options.shape, log, options.keep);
    summary.histories++;
    summary.ops += history.ops.length;
    summary.loaderRuns += history.runs.length;
    const kinds: Partial<Record<FaultKind, number>> = {};
    for (const f of history.faults) {
      summary.faults[f.kind]++;
      kinds[f.kind] = (kinds[f.kind] ?? 0) + 1;
    }
    const faultText = Object.entries(kinds).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
    log(`seed ${seed}: ${history.ops.length} operations, ${history.runs.length} loader runs, faults: ${faultText}; ${violations.length} violations`);
    if (violations.length > 0) {
      const replay = replayCommand(seed, options.shape);
      summary.failed.push({ seed, violations, file, replay });
      for (const v of violations.slice(0, 10)) log(`  [${v.rule}] +${v.at} ms: ${v.message}`);
      if (violations.length > 10) log(`  ... ${violations.length - 10} more`);
      log(`  history: ${file}; replay: ${replay}`);
    }
  }
  return summary;
}
