/**
 * Next.js's own caches with `dogpile-guard/next`, with Next's default per-process cache, and with
 * `@fortedigital/nextjs-cache-handler` on the same Redis: examples/nextjs built once
 * (`next build`), started three times on one throwaway Redis with each in turn: the handlers,
 * `NEXT_OWN_CACHE=1` (Next's own caches, each process its own), and
 * `NEXT_OTHER_CACHE_HANDLER=bench/nextjs-fortedigital-handler.mjs` (its redis-strings handler as
 * `cacheHandler` and nothing else, set up as its README's quick start; it has no `'use cache'`
 * handler, so `'use cache'` stays on Next's own, with Next's default memory size). Each run: steady load (2 clients per process, back to back)
 * on the ISR page (`revalidate = 1`) and on the page calling the `'use cache'` function (1 s
 * revalidation): renders (counted by the page in Redis) per revalidation period fleet-wide, and
 * request p99; then 60 concurrent requests across the three on a path no build produced: renders.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { freePort, type RedisServer, startRedis } from '../tools/redis-server.js';
import { NodeChild, root } from '../tools/child-process.js';
import { get, type Reply } from '../tools/http-client.js';
import { waitUntil } from '../tools/basics.js';
import { monotonicNow } from '../src/shared/clock.js';
import { median, percentile, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const nextBin = path.join(root, 'node_modules', 'next', 'dist', 'bin', 'next');
const example = path.join(root, 'examples', 'nextjs');
const LOAD_MS = 10_000;
const fortedigitalHandler = path.join(root, 'bench', 'nextjs-fortedigital-handler.mjs');
const fortedigitalInstalled = existsSync(path.join(root, 'node_modules', '@fortedigital', 'nextjs-cache-handler', 'package.json'));

/** A cache the example runs with: its label and what `next start` gets in its environment. */
interface Contender {
  name: string;
  label: string;
  env: NodeJS.ProcessEnv;
}

const CONTENDERS: Contender[] = [
  { name: 'dg', label: 'dogpile-guard/next', env: {} },
  { name: 'own', label: "Next's own cache", env: { NEXT_OWN_CACHE: '1' } },
  { name: 'forte', label: '@fortedigital/nextjs-cache-handler', env: { NEXT_OTHER_CACHE_HANDLER: fortedigitalHandler } },
];

function workspaceRoot(): string {
  const modules = realpathSync(path.join(root, 'node_modules'));
  let dir = root;
  while (!modules.startsWith(dir + path.sep) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}


interface Run {
  isrPerPeriod: number[];
  isrP99: number[];
  pricesPerPeriod: number[];
  pricesP99: number[];
  newPathRenders: number[];
}

async function load(ports: number[], target: string, ms: number): Promise<{ replies: Reply[]; seconds: number }> {
  const replies: Reply[] = [];
  const started = monotonicNow();
  const end = started + ms;
  await Promise.all(
    ports.flatMap((port) =>
      [0, 1].map(async () => {
        while (monotonicNow() < end) replies.push(await get(port, target));
      }),
    ),
  );
  return { replies, seconds: (monotonicNow() - started) / 1000 };
}

async function measure(redis: RedisServer, contender: Contender, env: NodeJS.ProcessEnv, run: Run, log: (m: string) => void): Promise<void> {
  const ports = [await freePort(), await freePort(), await freePort()];
  const apps = ports.map((port) => new NodeChild('next', [nextBin, 'start', example, '-p', String(port), '-H', '127.0.0.1'], { env: { ...env, REDIS_URL: redis.url, ...contender.env }, stdin: 'ignore' }));
  try {
    for (const port of ports) await waitUntil('next start answers', async () => (await get(port, '/stats').catch(() => undefined))?.status === 200, 60_000, 200);
    const client = redis.client();
    const count = async (name: string) => Number((await client.get(`example:renders:${name}`)) ?? 0);
    for (const [target, name, perPeriod, p99] of [
      ['/isr', 'isr', run.isrPerPeriod, run.isrP99],
      ['/prices', 'prices', run.pricesPerPeriod, run.pricesP99],
    ] as const) {
      await Promise.all(ports.map((port) => get(port, target)));
      const before = await count(name);
      const { replies, seconds } = await load(ports, target, LOAD_MS);
      const renders = (await count(name)) - before;
      perPeriod.push(renders / seconds);
      p99.push(percentile(replies.map((r) => r.ms), 99));
      log(`${contender.label} ${target}: ${replies.length} requests, ${renders} renders in ${seconds.toFixed(1)} s`);
    }
    const slug = `bench-${contender.name}-${run.newPathRenders.length}-${Date.now().toString(36)}`;
    await Promise.all(Array.from({ length: 60 }, (_, i) => get(ports[i % 3]!, `/items/${slug}`)));
    run.newPathRenders.push(await count(`item:${slug}`));
    client.disconnect();
  } finally {
    for (const app of apps) await app.stop('SIGTERM');
  }
}

export default async function nextjsBench(ctx: BenchContext): Promise<string> {
  if (!existsSync(nextBin)) return '## Next.js cache handlers\n\nSkipped: `next` is not installed.\n';
  const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NO_COLOR: '1', EXAMPLE_WORKSPACE_ROOT: workspaceRoot() };
  delete env.REDIS_URL;
  if (!existsSync(path.join(root, 'dist', 'next', 'index.js'))) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
  execFileSync(process.execPath, [nextBin, 'build', example], { cwd: root, env, stdio: 'pipe' });
  const redis = await startRedis();
  const repeats = ctx.quick ? 1 : 2;
  const contenders = CONTENDERS.filter((c) => c.name !== 'forte' || fortedigitalInstalled);
  const runs = new Map(contenders.map((c) => [c.name, newRun()]));
  try {
    for (let i = 0; i < repeats; i++) {
      for (const contender of contenders) await measure(redis, contender, env, runs.get(contender.name)!, ctx.log);
    }
  } finally {
    await redis.stop();
  }
  const row = (name: string, r: Run | undefined) =>
    r === undefined
      ? `| ${name} | not installed | | | | |`
      : `| ${name} | ${summary(r.isrPerPeriod, 2)} | ${summary(r.isrP99)} | ${summary(r.pricesPerPeriod, 2)} | ${summary(r.pricesP99)} | ${summary(r.newPathRenders, 0)} |`;
  const medians = (name: string) => {
    const r = runs.get(name);
    return r === undefined ? 'not installed' : `${median(r.isrPerPeriod).toFixed(2)} (ISR), ${median(r.pricesPerPeriod).toFixed(2)} ('use cache')`;
  };
  return [
    '## Next.js: renders per revalidation period (`bench/nextjs.bench.ts`)',
    '',
    `examples/nextjs built once, three \`next start\` processes on one Redis, 2 clients per process back to back for ${LOAD_MS / 1000} s on each page; each cache in turn, ${repeats} repeat(s), medians [min–max]. Renders are counted by the page itself in Redis. A revalidation period is 1 s, so 1.0 render per second is one per period for the whole fleet. \`@fortedigital/nextjs-cache-handler\` is set up as its README's quick start (its redis-strings handler on a node-redis client, the same Redis); only \`cacheHandler\` is set, as there; it has no \`'use cache'\` handler, so its \`'use cache'\` column is Next's own per-process handler.`,
    '',
    '| cache | ISR page (`revalidate = 1`): renders / s | ISR p99 (ms) | `\'use cache\'` (1 s): runs / s | p99 (ms) | new path, 60 concurrent requests: renders |',
    '| --- | --- | --- | --- | --- | --- |',
    row('`dogpile-guard/next` (`cacheHandler` + `cacheHandlers`, `cacheMaxMemorySize: 0`)', runs.get('dg')),
    row("Next's default cache (per process)", runs.get('own')),
    row('`@fortedigital/nextjs-cache-handler` (`cacheHandler`, redis-strings; `\'use cache\'` on Next\'s own)', runs.get('forte')),
    '',
    `Median renders per period: dogpile-guard/next ${medians('dg')}; Next's own cache ${medians('own')}; @fortedigital/nextjs-cache-handler ${medians('forte')}.`,
    '',
  ].join('\n');
}

function newRun(): Run {
  return { isrPerPeriod: [], isrP99: [], pricesPerPeriod: [], pricesP99: [], newPathRenders: [] };
}
