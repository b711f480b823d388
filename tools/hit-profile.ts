/**
 * Where a cache hit's CPU time goes inside a real server: one app of a benchmark worker, run
 * under `--cpu-prof` and loaded by autocannon (50 connections, 1 s of warm-up, then the
 * measured seconds; `bench/lib/hit-profile.ts`), with the self time per request of the samples
 * taken during the measured load summed by area (dogpile-guard's folders, each dependency,
 * Node's modules, the garbage collector, system calls) and by function. dogpile-guard runs as
 * built for the package (`bench/lib/built-sources.ts`).
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
 * Contenders that need Redis get a throwaway server. A shared machine's load moves every
 * figure: compare profiles taken one after the other, several times, and read the direction
 * rather than the digits (`npm run bench -- hit-share` does so for dogpile-guard's share).
 */
import path from 'node:path';
import { useBuiltSources } from '../bench/lib/built-sources.js';
import { profileHits } from '../bench/lib/hit-profile.js';
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

try {
  const profile = await profileHits({ worker, contender, seconds, checkout, redisUrl: redis?.url });
  const micros = (time: number) => `${time.toFixed(2).padStart(7)} µs`;
  console.log(`${contender} (${path.relative(root, checkout) || 'this tree'}): ${Math.round(profile.rps)} req/s, ${profile.requests} requests in ${seconds} s; busy ${micros(profile.busy)} per request`);
  console.log('\nself time per request, by area:');
  for (const [where, time] of [...profile.byArea].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${micros(time)}  ${where}`);
  const filter = only === undefined ? undefined : new RegExp(only);
  console.log(`\nself time per request, by function${filter ? ` (matching ${only})` : ''}:`);
  const functions = [...profile.byFunction].filter(([label]) => filter === undefined || filter.test(label)).sort((a, b) => b[1] - a[1]);
  for (const [label, time] of functions.slice(0, top)) console.log(`${micros(time)}  ${label}`);
  if (under !== undefined) {
    console.log(`\ntime per request inside ${under}, callees included:`);
    for (const line of profile.treeUnder(new RegExp(under), depth)) console.log(line);
  }
} finally {
  await redis?.stop();
}
