/**
 * Hits of several apps compared in alternating rounds: each app of a benchmark worker in its
 * own process (from this tree or another checkout), all started at once, then `--rounds`
 * rounds in which each app is loaded by autocannon (50 connections) for `--seconds`, one after
 * the other, the order reversed every round. Per app: its median req/s and CPU per request
 * (its own CPU time ÷ requests, from its `/cpu` route; user and system apart when the worker
 * gives them: a cost in the runtime, the garbage collector or page faults shows in both, where
 * a profile's self time shows neither), and per round its req/s ÷ the first
 * app's in the same round, median [min–max]. Rounds this short, alternated, follow the load of
 * a shared machine more closely than one long run per app.
 *
 * Copies of one app differ too: listing one contender several times (`a=fastify-same
 * b=fastify-same`) has given medians 5–10% apart on a shared machine. `--processes <n>` starts
 * n processes of every app and rounds go through them in turn, so that no app's figures rest on
 * a single process.
 *
 *   npm run hits:pairs -- <worker> <label>=<contender>[@<checkout>] ... [--rounds <n>] [--seconds <s>] [--processes <n>]
 *   e.g. npm run hits:pairs -- http-refresh-worker.ts same=fastify-same hit=fastify-dogpile before=fastify-dogpile@../base
 *
 * A checkout is another working tree of this repository (`git worktree add <dir> <commit>`, with
 * this tree's node_modules linked into it); its worker runs its own `src/`, built as the
 * benchmarks build it (`bench/lib/built-sources.ts`; BENCH_SOURCES=tsx runs the sources under
 * tsx). Apps that need Redis get a throwaway server.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { useBuiltSources } from '../bench/lib/built-sources.js';
import { median, summary } from '../bench/lib/stats.js';
import { NodeChild, root } from './child-process.js';
import { fetchReply } from './http-client.js';
import { startRedis } from './redis-server.js';

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(name);
  if (at === -1) return fallback;
  const value = Number(args[at + 1]);
  args.splice(at, 2);
  if (!(value > 0)) throw new Error(`${name} needs a positive number`);
  return value;
};
const rounds = Math.min(option('--rounds', 12), 60);
const seconds = Math.min(option('--seconds', 1.5), 10);
const processes = Math.min(Math.floor(option('--processes', 1)), 8);
const [worker, ...specs] = args;
if (!worker || specs.length < 2) throw new Error('usage: hit-pairs.ts <worker> <label>=<contender>[@<checkout>] <label>=<contender>[@<checkout>] ... [--rounds n] [--seconds s] [--processes n]');

interface App {
  label: string;
  contender: string;
  checkout: string;
  children: NodeChild[];
  ports: number[];
  rps: number[];
  cpu: number[];
  /** User and system CPU per request, when the worker's `/cpu` gives them apart. */
  user: number[];
  system: number[];
}
const apps: App[] = specs.map((spec) => {
  const match = /^([^=]+)=([^@]+)(?:@(.+))?$/.exec(spec);
  if (!match) throw new Error(`expected <label>=<contender>[@<checkout>], got ${spec}`);
  return { label: match[1]!, contender: match[2]!, checkout: path.resolve(match[3] ?? root), children: [], ports: [], rps: [], cpu: [], user: [], system: [] };
});

// As the benchmarks measure it: each checkout's `src/` as built for the package (BENCH_SOURCES=tsx: its sources under tsx).
[...new Set(apps.map((app) => app.checkout))].forEach((checkout, i) => useBuiltSources(checkout, checkout === root ? 'current' : `pairs-${i}`));

type Autocannon = (options: object) => Promise<{ requests: { average: number; total: number } }>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;
const redis = apps.some((app) => app.contender.includes('redis')) ? await startRedis() : undefined;

function start(app: App): Promise<void> {
  const child = new NodeChild(`${app.label} (${app.contender})`, ['--import', 'tsx', path.join(app.checkout, 'bench', worker!), app.contender, redis?.url ?? 'redis://127.0.0.1:1', '0'], { cwd: app.checkout });
  app.children.push(child);
  return child.waitFor(/^listening (\d+)/m, 60_000).then((match) => void app.ports.push(Number(match[1])));
}

/** The app process's CPU time so far (µs): in all, and user and system apart when its worker says (an earlier checkout's may not). */
const cpuMicros = async (port: number): Promise<{ micros: number; user?: number; system?: number }> =>
  JSON.parse((await fetchReply(port, '/cpu')).text) as { micros: number; user?: number; system?: number };

try {
  await Promise.all(apps.flatMap((app) => Array.from({ length: processes }, () => start(app))));
  for (const app of apps) for (const port of app.ports) await autocannon({ url: `http://127.0.0.1:${port}/hit`, connections: 50, duration: 1 });
  for (let round = 0; round < rounds; round++) {
    for (const app of round % 2 === 0 ? apps : [...apps].reverse()) {
      const port = app.ports[round % processes]!;
      const before = await cpuMicros(port);
      const run = await autocannon({ url: `http://127.0.0.1:${port}/hit`, connections: 50, duration: seconds });
      const after = await cpuMicros(port);
      const requests = Math.max(1, run.requests.total);
      app.cpu.push((after.micros - before.micros) / requests);
      if (after.user !== undefined && before.user !== undefined) app.user.push((after.user - before.user) / requests);
      if (after.system !== undefined && before.system !== undefined) app.system.push((after.system - before.system) / requests);
      app.rps.push(run.requests.average);
    }
  }
  const first = apps[0]!;
  const each = processes > 1 ? `, ${processes} processes per app in turn` : '';
  console.log(`${worker}: ${rounds} rounds of ${seconds} s per app, alternating${each}; ratio: req/s ÷ ${first.label}'s in the same round`);
  for (const app of apps) {
    const ratios = app.rps.map((rps, i) => rps / first.rps[i]!);
    const where = path.relative(root, app.checkout) || 'this tree';
    const split = app.user.length === 0 ? '' : ` (user ${median(app.user).toFixed(1)} + system ${median(app.system).toFixed(1)})`;
    console.log(
      `${app.label.padEnd(12)} ${app.contender} (${where}): ${median(app.rps).toFixed(0)} req/s, ${median(app.cpu).toFixed(1)} µs CPU per request${split}, ` +
        `ratio ${summary(ratios, 2)}`,
    );
  }
} finally {
  await Promise.all(apps.flatMap((app) => app.children.map((child) => child.endInput())));
  await redis?.stop();
}
