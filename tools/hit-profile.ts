/**
 * Where a cache hit's CPU time goes inside a real server: one app of a benchmark worker, run
 * under `--cpu-prof` and loaded by autocannon (50 connections, 1 s of warm-up, then the
 * measured seconds), with the profile's self time per request summed by area (dogpile-guard's
 * folders, each dependency, Node's modules, the garbage collector, system calls) and by
 * function. dogpile-guard runs as built for the package (`bench/lib/built-sources.ts`).
 *
 *   npm run profile:hit -- <worker> <contender> [seconds] [--checkout <dir>] [--only <regexp>] [--top <n>]
 *   e.g. npm run profile:hit -- http-refresh-worker.ts fastify-dogpile 6
 *        npm run profile:hit -- hono-worker.ts hono-dogpile 6 --only 'http/|hono/|lru'
 *        npm run profile:hit -- http-refresh-worker.ts fastify-dogpile 6 --under '^safeWriteHead' --depth 8
 *
 * `--under <regexp>` also prints the time spent inside the functions whose label (name, file,
 * line) matches, callees included, as a tree of their callees merged by label, `--depth` levels
 * deep (6): where a function's self time cannot say (a callee inlined in one app and not in
 * another, a Node internal called from two places), the tree does.
 *
 * `--checkout` profiles another checkout's `src/` with that checkout's worker (an earlier
 * commit: `git worktree add <dir> <commit>`, then link this tree's node_modules into it).
 * Contenders that need Redis get a throwaway server. The profile counts the whole process
 * (its start included), and a shared machine's load moves every figure: compare profiles
 * taken one after the other, several times, and read the direction rather than the digits.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { useBuiltSources } from '../bench/lib/built-sources.js';
import { root } from './child-process.js';
import { startRedis } from './redis-server.js';

const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const at = args.indexOf(name);
  if (at === -1) return undefined;
  const value = args[at + 1];
  if (value === undefined) throw new Error(`${name} needs a value`);
  args.splice(at, 2);
  return value;
};
const checkout = path.resolve(option('--checkout') ?? root);
const only = option('--only');
const top = Number(option('--top') ?? 30);
const under = option('--under');
const depth = Number(option('--depth') ?? 6);
const [worker, contender, secondsArg = '5'] = args;
if (!worker || !contender) throw new Error('usage: hit-profile.ts <worker> <contender> [seconds] [--checkout <dir>] [--only <regexp>] [--top <n>] [--under <regexp> [--depth <n>]]');
const seconds = Number(secondsArg);
if (!(seconds > 0 && seconds <= 60)) throw new Error(`seconds must be in (0, 60], got ${secondsArg}`);

useBuiltSources(checkout, checkout === root ? 'current' : 'profiled');
const redis = contender.includes('redis') ? await startRedis() : undefined;
const dir = mkdtempSync(path.join(os.tmpdir(), 'hit-profile-'));

type Autocannon = (options: object) => Promise<{ requests: { average: number; total: number } }>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const labelOf = (node: ProfileNode): string => `${node.callFrame.functionName || '(anonymous)'}  ${node.callFrame.url.split('/').slice(-2).join('/')}:${node.callFrame.lineNumber + 1}`;

/** The tree below the nodes matching `pattern` (none of whose callers match), callees merged by label: one line per label and level, its time callees included. */
function treeUnder(nodes: ProfileNode[], selfTime: Map<number, number>, pattern: RegExp, levels: number, perRequest: (micros: number) => string): string[] {
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
    for (const id of ids) for (const child of byId.get(id)!.children ?? []) merged.set(labelOf(byId.get(child)!), [...(merged.get(labelOf(byId.get(child)!)) ?? []), child]);
    const rows = [...merged].map(([label, group]) => [label, group, group.reduce((sum, id) => sum + (total.get(id) ?? 0), 0)] as const).sort((a, b) => b[2] - a[2]);
    for (const [label, group, time] of rows) {
      if (perRequest(time).trim() === '0.00 µs') continue;
      lines.push(`${perRequest(time)}  ${'  '.repeat(level)}${label}`);
      if (level < levels) walk(group, level + 1);
    }
  };
  const rootTime = roots.reduce((sum, node) => sum + (total.get(node.id) ?? 0), 0);
  lines.push(`${perRequest(rootTime)}  ${[...new Set(roots.map(labelOf))].join(' | ') || '(no function matches)'}`);
  walk(roots.map((node) => node.id), 1);
  return lines;
}

try {
  const child = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', path.join(checkout, 'bench', worker), contender, redis?.url ?? 'redis://127.0.0.1:1', '0'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${worker} ${contender} did not start within 60 s`)), 60_000);
    child.stdout.on('data', (chunk: Buffer) => {
      const match = /listening (\d+)/.exec(chunk.toString());
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
  });
  const url = `http://127.0.0.1:${port}/hit`;
  await autocannon({ url, connections: 50, duration: 1 });
  const run = await autocannon({ url, connections: 50, duration: seconds });
  child.stdin.end();
  await exited;

  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error('the worker wrote no profile');
  const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const selfTime = new Map<number, number>();
  profile.samples.forEach((id, i) => selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  const area = (url: string, name: string): string => {
    const built = /\/bench-src\/[^/]+\/([^/]+)\//.exec(url);
    if (built) return `dogpile-guard ${built[1]}/`;
    if (url.includes('node_modules/')) return url.split('node_modules/').pop()!.split('/').slice(0, url.includes('node_modules/@') ? 2 : 1).join('/');
    if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
    if (url.includes('/bench/')) return 'the benchmark app';
    return name.startsWith('(') ? name : `native ${name}`;
  };
  const byArea = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const { functionName, url } = node.callFrame;
    const time = selfTime.get(node.id) ?? 0;
    if (time === 0 || functionName === '(idle)' || functionName === '(program)') continue;
    busy += time;
    const where = area(url, functionName);
    byArea.set(where, (byArea.get(where) ?? 0) + time);
    const label = labelOf(node);
    byFunction.set(label, (byFunction.get(label) ?? 0) + time);
  }
  const requests = run.requests.total;
  const perRequest = (micros: number) => `${(micros / requests).toFixed(2).padStart(7)} µs`;
  console.log(`${contender} (${path.relative(root, checkout) || 'this tree'}): ${Math.round(run.requests.average)} req/s, ${requests} requests in ${seconds} s; busy ${perRequest(busy)} per request`);
  console.log('\nself time per request, by area:');
  for (const [where, time] of [...byArea].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${perRequest(time)}  ${where}`);
  const filter = only === undefined ? undefined : new RegExp(only);
  console.log(`\nself time per request, by function${filter ? ` (matching ${only})` : ''}:`);
  const functions = [...byFunction].filter(([label]) => filter === undefined || filter.test(label)).sort((a, b) => b[1] - a[1]);
  for (const [label, time] of functions.slice(0, top)) console.log(`${perRequest(time)}  ${label}`);
  if (under !== undefined) {
    console.log(`\ntime per request inside ${under}, callees included:`);
    for (const line of treeUnder(profile.nodes, selfTime, new RegExp(under), depth, perRequest)) console.log(line);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
  await redis?.stop();
}
