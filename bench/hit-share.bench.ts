/**
 * dogpile-guard's own share of a hit's CPU time inside a real server, per adapter and store:
 * each app profiled while it answers hits (`bench/lib/hit-profile.ts`: `--cpu-prof`, autocannon
 * with 50 connections, only the samples of the measured load), the self time of the functions
 * in dogpile-guard's `src/` folders (and of lru-cache, its in-process store) per request,
 * against all the CPU time the process spent per request. Next to the hits, each framework's
 * route sending the same bytes, whose CPU per request a hit's is divided by within a repeat.
 * Both sides of a share move together with the machine's load, which is what makes it
 * steadier than a ratio of throughputs measured one after the other. `npm run bench -- hit-share`.
 */
import { startRedis } from '../tools/redis-server.js';
import { profileHits, type HitProfile } from './lib/hit-profile.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import path from 'node:path';
import { root } from '../tools/child-process.js';
import { useBuiltSources } from './lib/built-sources.js';

interface App {
  worker: string;
  contender: string;
  name: string;
  /** The contender of the same framework's route sending the same bytes; none for that route itself. */
  same?: string;
  /** Another checkout's app (`HIT_SHARE_BEFORE`); this tree's otherwise. */
  checkout?: string;
  /** Its key among the runs: the contender, or `before:` + the contender. */
  id?: string;
}

/**
 * `HIT_SHARE_BEFORE=<dir>`: some hits of another checkout too (a worktree of an earlier commit,
 * this tree's node_modules linked into it), in the same run: the contenders named in
 * `HIT_SHARE_BEFORE_APPS` (comma-separated; the two Express hits in process and on Redis + `l1`
 * by default).
 */
const BEFORE = process.env.HIT_SHARE_BEFORE === undefined || process.env.HIT_SHARE_BEFORE === '' ? undefined : path.resolve(process.env.HIT_SHARE_BEFORE);
const BEFORE_APPS = (process.env.HIT_SHARE_BEFORE_APPS || 'express-dogpile,express-dogpile-redis-l1').split(',').map((name) => name.trim());

const APPS: App[] = [
  { worker: 'http-refresh-worker.ts', contender: 'express-same', name: 'Express 5, own route sending the same bytes' },
  { worker: 'http-refresh-worker.ts', contender: 'express-dogpile', name: 'Express 5 + `dogpileGuard`, in-process', same: 'express-same' },
  { worker: 'http-refresh-worker.ts', contender: 'express-dogpile-redis-l1', name: 'Express 5 + `dogpileGuard`, Redis + `l1`', same: 'express-same' },
  { worker: 'http-refresh-worker.ts', contender: 'express-dogpile-redis', name: 'Express 5 + `dogpileGuard`, Redis (no `l1`: a round trip per hit)', same: 'express-same' },
  { worker: 'http-refresh-worker.ts', contender: 'express-same-np', name: 'Express 5 without `x-powered-by`, own route sending the same bytes' },
  { worker: 'http-refresh-worker.ts', contender: 'express-dogpile-np', name: 'Express 5 without `x-powered-by` + `dogpileGuard`, in-process', same: 'express-same-np' },
  { worker: 'http-refresh-worker.ts', contender: 'fastify-same', name: 'Fastify 5, own route sending the same bytes' },
  { worker: 'http-refresh-worker.ts', contender: 'fastify-dogpile', name: 'Fastify 5 + `dogpileGuardPlugin`, in-process', same: 'fastify-same' },
  { worker: 'http-refresh-worker.ts', contender: 'fastify-dogpile-redis-l1', name: 'Fastify 5 + `dogpileGuardPlugin`, Redis + `l1`', same: 'fastify-same' },
  { worker: 'http-refresh-worker.ts', contender: 'fastify-dogpile-redis', name: 'Fastify 5 + `dogpileGuardPlugin`, Redis (no `l1`: a round trip per hit)', same: 'fastify-same' },
  { worker: 'hono-worker.ts', contender: 'hono-same', name: 'Hono 4 on @hono/node-server, own route sending the same bytes' },
  { worker: 'hono-worker.ts', contender: 'hono-dogpile', name: 'Hono 4 + `dogpileGuard`, in-process', same: 'hono-same' },
  { worker: 'hono-worker.ts', contender: 'hono-dogpile-redis-l1', name: 'Hono 4 + `dogpileGuard`, Redis + `l1`', same: 'hono-same' },
  { worker: 'hono-worker.ts', contender: 'hono-dogpile-redis', name: 'Hono 4 + `dogpileGuard`, Redis (no `l1`: a round trip per hit)', same: 'hono-same' },
];
/**
 * `HIT_SHARE_FRAMEWORKS=<names>`: only the apps of these frameworks (comma-separated:
 * `express`, `fastify`, `hono`), for a shorter run about one adapter; all of them otherwise.
 */
const FRAMEWORKS = (process.env.HIT_SHARE_FRAMEWORKS ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
for (const name of FRAMEWORKS) {
  if (!APPS.some((app) => app.contender.startsWith(`${name}-`))) throw new Error(`HIT_SHARE_FRAMEWORKS: ${name} is not one of express, fastify, hono`);
}
if (FRAMEWORKS.length > 0) APPS.splice(0, APPS.length, ...APPS.filter((app) => FRAMEWORKS.some((name) => app.contender.startsWith(`${name}-`))));
if (BEFORE !== undefined) {
  for (const contender of BEFORE_APPS) {
    const app = APPS.find((a) => a.contender === contender && a.same !== undefined);
    if (app === undefined) throw new Error(`HIT_SHARE_BEFORE_APPS: ${contender} is not one of the hits (${APPS.filter((a) => a.same !== undefined).map((a) => a.contender).join(', ')})`);
    // Beside the hit of this tree it is compared with.
    APPS.splice(APPS.indexOf(app) + 1, 0, { ...app, id: `before:${contender}`, checkout: BEFORE, name: `${app.name}, from \`HIT_SHARE_BEFORE\` (${path.basename(BEFORE)})` });
  }
}

/** Self time per request in dogpile-guard's folders, and in lru-cache. */
function own(profile: HitProfile): { ours: number; store: number } {
  let ours = 0;
  for (const [where, time] of profile.byArea) if (where.startsWith('dogpile-guard ')) ours += time;
  return { ours, store: profile.byArea.get('lru-cache') ?? 0 };
}

export default async function hitShareBench(ctx: BenchContext): Promise<string> {
  const repeats = ctx.quick ? 1 : 3;
  const seconds = ctx.quick ? 1 : 3;
  const redis = await startRedis();
  const idOf = (app: App) => app.id ?? app.contender;
  if (BEFORE !== undefined) useBuiltSources(BEFORE, 'hit-share-before');
  const runs = new Map<string, HitProfile[]>(APPS.map((app) => [idOf(app), []]));
  try {
    for (let r = 0; r < repeats; r++) {
      // The apps one after the other, in an order reversed every other repeat: a hit next to its framework's same-bytes route.
      for (const app of r % 2 === 0 ? APPS : [...APPS].reverse()) {
        const profile = await profileHits({ worker: app.worker, contender: app.contender, seconds, checkout: app.checkout ?? root, redisUrl: redis.url });
        runs.get(idOf(app))!.push(profile);
        const { ours, store } = own(profile);
        ctx.log(`#${r + 1} ${idOf(app)}: ${profile.rps.toFixed(0)} req/s, busy ${profile.busy.toFixed(1)} µs/req, dogpile-guard ${ours.toFixed(2)} µs, lru-cache ${store.toFixed(2)} µs`);
      }
    }
  } finally {
    await redis.stop();
  }

  const rows: string[] = [];
  for (const app of APPS) {
    const list = runs.get(idOf(app))!;
    const ours = list.map((p) => own(p).ours);
    const store = list.map((p) => own(p).store);
    const shares = list.map((p, i) => (ours[i]! + store[i]!) / p.busy);
    const same = app.same === undefined ? undefined : runs.get(app.same)!;
    const cpuRatio = same === undefined ? '1.00' : summary(list.map((p, i) => p.busy / same[i]!.busy), 2);
    const share = app.same === undefined ? '—' : `${(median(shares) * 100).toFixed(1)}% [${(Math.min(...shares) * 100).toFixed(1)}–${(Math.max(...shares) * 100).toFixed(1)}%]`;
    rows.push(`| ${app.name} | ${summary(list.map((p) => p.rps), 0)} | ${summary(list.map((p) => p.busy))} | ${cpuRatio} | ${summary(ours, 2)} | ${summary(store, 2)} | ${share} |`);
  }
  return [
    "## dogpile-guard's share of a hit (`bench/hit-share.bench.ts`)",
    '',
    `Each app profiled alone while it answers hits on \`GET /hit\` (~1 KB of JSON): \`--cpu-prof\`, autocannon with 50 connections, 1 s of warm-up, then ${seconds} s whose samples alone are counted; ${repeats} repeats, the apps one after the other in an order reversed every other repeat. *Busy*: the CPU time sampled per request, idle time excluded (it leaves out work on other threads and some of the kernel's, so it reads lower than the process's CPU time). *dogpile-guard*: the self time of the functions in its \`src/\` folders (built for the package) per request; *lru-cache*: its in-process store's. *Share*: both ÷ busy, median [min–max]. *Busy ÷ same bytes*: a hit's busy time ÷ its framework's route sending the same bytes, in the same repeat. A profile's self time leaves out what the framework and Node do because of a hit (hooks, a middleware's promise, the stored \`Date\` and \`Content-Length\` written as fields): the *busy* column has it.`,
    '',
    '| app | req/s | busy (µs per request) | busy ÷ same bytes | dogpile-guard (µs per request) | lru-cache (µs per request) | share |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
