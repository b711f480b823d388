/**
 * Hono on `@hono/node-server`, every app in its own process (`bench/hono-worker.ts`), one
 * throwaway Redis, autocannon and the stampede client in this process, all on loopback:
 *
 * - hits: requests per second, p99 and CPU per request on a warm route: the `dogpileGuard`
 *   middleware's hit against Hono's own route sending the same bytes (the body prepared once
 *   and the header fields of a hit), the body alone, and the uncached route (which builds its
 *   JSON per call). Each repeat loads every app once, in an order reversed every repeat, the
 *   same-bytes route between the two hits; a ratio is taken within a repeat, so that a change
 *   in the machine's load between repeats moves both sides of it;
 * - cold burst: 500 concurrent requests over two processes to a route nobody has cached whose
 *   handler takes 100 ms — handler runs and client latency, Hono without the cache vs with the
 *   middleware on one Redis.
 *
 * `BENCH_HONO=hits` measures only the hits.
 */
import http from 'node:http';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { median, percentile, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { AppProcess, measureHits, type HitRun } from './lib/app-process.js';

const HANDLER_MS = 100;
const STAMPEDE_REQUESTS = 500;
const HIT_CONNECTIONS = 50;
const HOST_HEADER = 'shop.example';

type Contender = 'hono-bare' | 'hono-bytes' | 'hono-same' | 'hono-dogpile' | 'hono-dogpile-redis-l1';
const NAMES: Record<Contender, string> = {
  'hono-bare': 'Hono, uncached (JSON built per request)',
  'hono-bytes': "Hono's own route sending the body (prepared once)",
  'hono-same': "Hono's own route sending the same bytes: the body and a hit's header fields",
  'hono-dogpile': 'Hono + `dogpileGuard` hit (in-process cache)',
  'hono-dogpile-redis-l1': 'Hono + `dogpileGuard` hit (Redis + `l1`)',
};

const request = (port: number, urlPath: string, agent: http.Agent | false = false): Promise<Reply> =>
  fetchReply(port, urlPath, { agent, headers: { host: HOST_HEADER }, timeoutMs: 30_000 });

async function stampede(redis: RedisServer, ports: number[], id: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: STAMPEDE_REQUESTS });
  try {
    await Promise.all(Array.from({ length: STAMPEDE_REQUESTS }, (_, i) => request(ports[i % ports.length]!, '/ping', agent)));
    const settled = await Promise.allSettled(Array.from({ length: STAMPEDE_REQUESTS }, (_, i) => request(ports[i % ports.length]!, `/slow?id=${id}`, agent)));
    const ok = settled.flatMap((s) => (s.status === 'fulfilled' && s.value.status === 200 ? [s.value] : []));
    return {
      runs: Number((await redis.command('GET', `runs:${id}`)) ?? 0),
      p99: percentile(ok.map((r) => r.ms), 99),
      failed: STAMPEDE_REQUESTS - ok.length,
      distinct: new Set(ok.map((r) => r.text)).size,
    };
  } finally {
    agent.destroy();
  }
}

export default async function honoBench(ctx: BenchContext): Promise<string> {
  const repeats = ctx.quick ? 2 : 8;
  const seconds = ctx.quick ? 1 : 1.5;
  const redis = await startRedis();
  // The order of a repeat (reversed every other one): the same-bytes route next to both hits.
  const hitIds: Contender[] = ['hono-bare', 'hono-bytes', 'hono-dogpile', 'hono-same', 'hono-dogpile-redis-l1'];
  const lines: string[] = [];
  try {
    const apps = new Map(hitIds.map((id) => [id, new AppProcess(id, 'hono-worker.ts', [id, redis.url, String(HANDLER_MS)])] as const));
    try {
      const ports = new Map<Contender, number>();
      for (const [id, app] of apps) ports.set(id, await app.ready);
      for (const id of hitIds) {
        const port = ports.get(id)!;
        await request(port, '/hit');
        if (id.includes('dogpile')) {
          // Right after the first response its store may still be on its way to Redis (COALESCED).
          let last: Reply | undefined;
          for (let k = 0; k < 10 && last?.xCache !== 'HIT'; k++) last = await request(port, '/hit');
          if (last?.xCache !== 'HIT') throw new Error(`${id}: expected a HIT on the warm route, got ${String(last?.xCache)}`);
        }
        await measureHits(port, '/hit', { seconds: 0.5, connections: HIT_CONNECTIONS, host: HOST_HEADER });
      }
      const runs = new Map<Contender, HitRun[]>(hitIds.map((id) => [id, []]));
      for (let r = 0; r < repeats; r++) {
        for (const id of r % 2 === 0 ? hitIds : [...hitIds].reverse()) {
          const run = await measureHits(ports.get(id)!, '/hit', { seconds, connections: HIT_CONNECTIONS, host: HOST_HEADER });
          runs.get(id)!.push(run);
          ctx.log(`hits #${r + 1} ${id}: ${run.rps.toFixed(0)} req/s, p99 ${run.p99} ms, ${run.cpuPerRequest.toFixed(0)} µs CPU/req`);
        }
      }
      const same = runs.get('hono-same')!;
      lines.push(
        `${repeats} repeats of ${seconds} s per app, ${HIT_CONNECTIONS} connections. *req/s ratio*: the app's req/s ÷ the same-bytes route's in the same repeat, median [min–max]; *CPU ratio*: the same-bytes route's median CPU per request ÷ the app's (below 1: the app costs more per request).`,
        '',
        '| app | req/s | p99 latency (ms) | app CPU per request (µs) | req/s ratio vs own route, same bytes | CPU ratio |',
        '|---|---|---|---|---|---|',
      );
      for (const id of hitIds) {
        const list = runs.get(id)!;
        const ratios = list.map((w, r) => w.rps / same[r]!.rps);
        const cpuRatio = median(same.map((w) => w.cpuPerRequest)) / median(list.map((w) => w.cpuPerRequest));
        lines.push(`| ${NAMES[id]} | ${summary(list.map((w) => w.rps), 0)} | ${summary(list.map((w) => w.p99), 0)} | ${summary(list.map((w) => w.cpuPerRequest), 1)} | ${id === 'hono-same' ? '1.00' : summary(ratios, 2)} | ${cpuRatio.toFixed(2)} |`);
      }
    } finally {
      await Promise.all([...apps.values()].map((app) => app.endInput()));
    }

    if (process.env.BENCH_HONO === 'hits') return ['## Hono (`dogpile-guard/hono`)', '', ...lines].join('\n');
    lines.push('', `Cold burst: ${STAMPEDE_REQUESTS} concurrent requests over 2 processes, handler ${HANDLER_MS} ms.`, '', '| app | handler runs | p99 latency (ms) | distinct bodies | failed |', '|---|---|---|---|---|');
    for (const id of ['hono-bare', 'hono-dogpile-redis-l1'] as const) {
      const pair = [0, 1].map((i) => new AppProcess(`${id}-${i}`, 'hono-worker.ts', [id, redis.url, String(HANDLER_MS)]));
      try {
        const ports = await Promise.all(pair.map((app) => app.ready));
        const results = [];
        for (let r = 0; r < repeats; r++) {
          const run = await stampede(redis, ports, `${id}-${r}`);
          results.push(run);
          ctx.log(`burst #${r + 1} ${id}: ${run.runs} handler runs, p99 ${run.p99.toFixed(0)} ms, ${run.distinct} distinct bodies, ${run.failed} failed`);
        }
        lines.push(`| ${id === 'hono-bare' ? 'Hono, uncached' : 'Hono + `dogpileGuard` (Redis + `l1`)'} | ${summary(results.map((x) => x.runs), 0)} | ${summary(results.map((x) => x.p99), 0)} | ${summary(results.map((x) => x.distinct), 0)} | ${summary(results.map((x) => x.failed), 0)} |`);
      } finally {
        await Promise.all(pair.map((app) => app.endInput()));
      }
    }
  } finally {
    await redis.stop();
  }
  return ['## Hono (`dogpile-guard/hono`)', '', ...lines].join('\n');
}
