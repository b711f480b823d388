/**
 * Where a Fastify hit's time goes: the CPU time per request of a bare route sending the bytes of
 * a hit, of the same route given one by one the hooks the plugin puts on a cached route (no
 * cache at all), and of a real hit from `dogpileGuardPlugin` with the in-process cache. Every
 * app in its own process (`bench/http-refresh-worker.ts`), autocannon in this one, rotated
 * repeats. `npm run bench -- fastify-hooks`.
 */
import { startRedis } from '../tools/redis-server.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import { AppProcess, measureHits, type HitRun } from './lib/app-process.js';

const CONTENDERS: Array<[id: string, what: string]> = [
  ['fastify-bytes', 'bare route, the body as prepared bytes (no hit headers)'],
  ['shape-', 'bare route, the bytes and the headers of a hit'],
  ['shape-R', '+ an app-wide `onRequest` hook that wraps `writeHead` (the plugin: `Dogpile-*` fields never sent, refreshes admitted)'],
  ['shape-O', '+ an app-wide `onSend` hook (the plugin: bypass `Cache-Status`, invalidation on writes)'],
  ['shape-S', '+ a route `onSend` hook (the plugin: the leader\'s response)'],
  ['shape-P', '+ the handler answering from a resolved promise'],
  ['shape-ROSP', 'all four: the plugin\'s shape without a cache'],
  ['fastify-map', 'the plugin\'s hooks (its real `writeHead` wrap) and its way of sending a hit (`servedInstructions`), the hit taken from a Map: all of a hit but `guard.plan` and `guard.handle`'],
  ['fastify-dogpile', '`dogpileGuardPlugin`, a hit from the in-process cache'],
];

export default async function fastifyHooksBench(ctx: BenchContext): Promise<string> {
  const repeats = ctx.quick ? 2 : 5;
  const seconds = ctx.quick ? 0.8 : 1.5;
  const redis = await startRedis();
  const apps = CONTENDERS.map(([id]) => new AppProcess(id, 'http-refresh-worker.ts', [id, redis.url, '0']));
  const runs = CONTENDERS.map(() => [] as HitRun[]);
  try {
    const ports = await Promise.all(apps.map((a) => a.ready));
    for (const port of ports) await measureHits(port, '/hit', { seconds: 0.5, connections: 50 });
    for (let r = 0; r < repeats; r++) {
      for (let j = 0; j < CONTENDERS.length; j++) {
        const i = (j + r) % CONTENDERS.length;
        const run = await measureHits(ports[i]!, '/hit', { seconds, connections: 50 });
        runs[i]!.push(run);
        ctx.log(`#${r + 1} ${CONTENDERS[i]![0]}: ${run.rps.toFixed(0)} req/s, ${run.cpuPerRequest.toFixed(1)} µs CPU/req`);
      }
    }
  } finally {
    await Promise.all(apps.map((a) => a.endInput()));
    await redis.stop();
  }
  const base = median(runs[0]!.map((run) => run.cpuPerRequest));
  const rows = CONTENDERS.map(([id, what], i) => {
    const cpu = runs[i]!.map((run) => run.cpuPerRequest);
    const rps = runs[i]!.map((run) => run.rps);
    return `| \`${id}\` | ${what} | ${summary(cpu)} | ${(median(cpu) - base).toFixed(1)} | ${summary(rps, 0)} |`;
  });
  return [
    '## Where a Fastify hit\'s time goes (`bench/fastify-hooks.bench.ts`)',
    '',
    `A bare Fastify 5 route sending the ~1 KB body of a hit, the same route with the hooks \`dogpileGuardPlugin\` gives a cached route added one by one (no cache), and a real hit. Each app in its own process; autocannon, 50 connections, ${repeats} × ${seconds} s per app, rotated. CPU time is the app process's own (user + system) per request, steadier than req/s on a shared machine. Median [min–max]. \`npm run bench -- fastify-hooks\`.`,
    '',
    '| app | what it adds | CPU µs per request | over the bare route (µs, medians) | req/s |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
