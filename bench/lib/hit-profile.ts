/**
 * One app of a benchmark worker profiled while it answers hits: the worker runs under
 * `--cpu-prof`, autocannon (50 connections) warms it for a second and then loads it for the
 * measured seconds, and only the samples taken during the measured load are counted (the
 * profile's clock and `process.hrtime` are both the system's monotonic clock). What the worker
 * runs as dogpile-guard is whatever `useBuiltSources` set up before (the build, or the sources).
 * Used by `tools/hit-profile.ts` and `bench/hit-share.bench.ts`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { NodeChild } from '../../tools/child-process.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface HitProfile {
  /** Requests answered during the measured load, and their rate. */
  requests: number;
  rps: number;
  /** CPU time sampled during the measured load, per request (µs): all but idle time, `(program)` (native code outside JavaScript) included. */
  busy: number;
  /** Self time per request (µs) by area: `dogpile-guard <folder>/`, a dependency, `node:<module>`, `(garbage collector)`... */
  byArea: Map<string, number>;
  /** Self time per request (µs) by function label (`name  dir/file:line`). */
  byFunction: Map<string, number>;
  /** Lines of the time spent inside the functions matching `pattern`, callees included, as a tree of callees `levels` deep. */
  treeUnder(pattern: RegExp, levels: number): string[];
}

type Autocannon = (options: object) => Promise<{ requests: { average: number; total: number } }>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export const labelOf = (node: ProfileNode): string => `${node.callFrame.functionName || '(anonymous)'}  ${node.callFrame.url.split('/').slice(-2).join('/')}:${node.callFrame.lineNumber + 1}`;

/** Where a function's code lives: one of dogpile-guard's `src/` folders (as the benchmarks build it), a dependency, a Node module, or V8's own. */
function area(url: string, name: string): string {
  const built = /\/bench-src\/[^/]+\/([^/]+)\//.exec(url) ?? /\/src\/([^/]+)\/[^/]+\.ts$/.exec(url);
  if (built) return `dogpile-guard ${built[1]}/`;
  if (url.includes('node_modules/')) return url.split('node_modules/').pop()!.split('/').slice(0, url.includes('node_modules/@') ? 2 : 1).join('/');
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  if (url.includes('/bench/')) return 'the benchmark app';
  return name.startsWith('(') ? name : `native ${name}`;
}

const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n);

/** Profiles `contender` of `bench/<worker>` from `checkout` (a repository root) for `seconds` of hits on `/hit`. */
export async function profileHits(options: { worker: string; contender: string; seconds: number; checkout: string; redisUrl?: string; host?: string }): Promise<HitProfile> {
  const { worker, contender, seconds, checkout } = options;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hit-profile-'));
  try {
    const child = new NodeChild(`${worker} ${contender}`, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', path.join(checkout, 'bench', worker), contender, options.redisUrl ?? 'redis://127.0.0.1:1', '0'], { cwd: checkout });
    let from: number;
    let to: number;
    let run: Awaited<ReturnType<Autocannon>>;
    try {
      const port = Number((await child.waitFor(/^listening (\d+)/m, 60_000))[1]);
      const load = { url: `http://127.0.0.1:${port}/hit`, connections: 50, ...(options.host ? { headers: { host: options.host } } : {}) };
      await autocannon({ ...load, duration: 1 });
      from = monotonicMicros();
      run = await autocannon({ ...load, duration: seconds });
      to = monotonicMicros();
    } catch (error) {
      await child.dispose();
      throw error;
    }
    // The worker writes its profile as it exits, when its input ends.
    await child.endInput(60_000);

    const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`${worker} ${contender} wrote no profile`);
    const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
    // Self time of each node from the samples taken while the measured load ran.
    const selfTime = new Map<number, number>();
    let at = profile.startTime;
    let inWindow = 0;
    profile.samples.forEach((id, i) => {
      const delta = profile.timeDeltas[i] ?? 0;
      at += delta;
      if (at < from || at > to) return;
      inWindow++;
      selfTime.set(id, (selfTime.get(id) ?? 0) + delta);
    });
    if (inWindow === 0) throw new Error(`${worker} ${contender}: no sample of the profile falls in the measured load (its clock is not the monotonic one)`);

    const requests = run.requests.total;
    const byArea = new Map<string, number>();
    const byFunction = new Map<string, number>();
    let busy = 0;
    for (const node of profile.nodes) {
      const { functionName, url } = node.callFrame;
      const time = (selfTime.get(node.id) ?? 0) / requests;
      // `(program)` is CPU time in V8 and native code outside any JavaScript frame: counted, as the process spent it.
      if (time === 0 || functionName === '(idle)') continue;
      busy += time;
      const where = area(url, functionName);
      byArea.set(where, (byArea.get(where) ?? 0) + time);
      const label = labelOf(node);
      byFunction.set(label, (byFunction.get(label) ?? 0) + time);
    }
    return {
      requests,
      rps: run.requests.average,
      busy,
      byArea,
      byFunction,
      treeUnder: (pattern, levels) => treeUnder(profile.nodes, selfTime, pattern, levels, requests),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const perRequest = (micros: number, requests: number): string => `${(micros / requests).toFixed(2).padStart(7)} µs`;

/** The tree below the nodes matching `pattern` (none of whose callers match), callees merged by label: one line per label and level, its time callees included. */
function treeUnder(nodes: ProfileNode[], selfTime: Map<number, number>, pattern: RegExp, levels: number, requests: number): string[] {
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  // Time with callees: each sampled node's self time added to it and to every caller.
  const total = new Map<number, number>();
  for (const [id, time] of selfTime) for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) total.set(at, (total.get(at) ?? 0) + time);
  const matches = (id: number) => pattern.test(labelOf(byId.get(id)!));
  const roots = nodes.filter((node) => {
    if (!matches(node.id)) return false;
    for (let at = parent.get(node.id); at !== undefined; at = parent.get(at)) if (matches(at)) return false;
    return true;
  });
  const lines: string[] = [];
  const walk = (ids: number[], level: number) => {
    const merged = new Map<string, number[]>();
    for (const id of ids) {
      for (const child of byId.get(id)!.children ?? []) {
        const label = labelOf(byId.get(child)!);
        merged.set(label, [...(merged.get(label) ?? []), child]);
      }
    }
    const rows = [...merged].map(([label, group]) => [label, group, group.reduce((sum, id) => sum + (total.get(id) ?? 0), 0)] as const).sort((a, b) => b[2] - a[2]);
    for (const [label, group, time] of rows) {
      if (time / requests < 0.005) continue;
      lines.push(`${perRequest(time, requests)}  ${'  '.repeat(level)}${label}`);
      if (level < levels) walk(group, level + 1);
    }
  };
  const rootTime = roots.reduce((sum, node) => sum + (total.get(node.id) ?? 0), 0);
  lines.push(`${perRequest(rootTime, requests)}  ${[...new Set(roots.map(labelOf))].join(' | ') || '(no function matches)'}`);
  walk(
    roots.map((node) => node.id),
    1,
  );
  return lines;
}
