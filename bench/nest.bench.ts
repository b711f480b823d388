/**
 * NestJS (issue 5, "Benchmark"): `@Cached` against `@nestjs/cache-manager`'s
 * `CacheInterceptor` (cache-manager 7 + Keyv + @keyv/redis) on the same route, the same Redis
 * and the same NestJS 12 app (Express platform), each app in its own process
 * (`bench/nest-worker.ts`):
 *
 * - cold stampede: 300 concurrent requests to a key nobody has cached, handler 200 ms —
 *   how many times the handler runs, and the latency the clients see;
 * - hits: requests per second on a warm key, with autocannon (50 connections).
 */
import os from 'node:os';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { median, percentile, ratio, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { AppProcess, measureHits, type HitRun } from './lib/app-process.js';



const CONTENDERS = [
  { id: 'cache-manager', name: '`@nestjs/cache-manager` `CacheInterceptor` (cache-manager 7 + Keyv + @keyv/redis)' },
  { id: 'dogpile', name: 'dogpile-guard `@Cached` (`redis`)' },
  { id: 'dogpile-l1', name: 'dogpile-guard `@Cached` (`redis` + `l1: true`)' },
] as const;
type ContenderId = (typeof CONTENDERS)[number]['id'];
/** A contender of `bench/nest-worker.ts` (this benchmark's, or `nest-cache-manager`'s). */
export type WorkerContender = ContenderId | 'dogpile-cache-manager';

/** How long the handler takes on a miss. */
export const HANDLER_MS = 200;
export const STAMPEDE_REQUESTS = 300;
export const HIT_CONNECTIONS = 50;

// --- the app processes ----------------------------------------------------------------------

export function request(port: number, urlPath: string): Promise<Reply> {
  return fetchReply(port, urlPath, { timeoutMs: 30_000 });
}

/** The app of contender `contender` in its own process. */
export function newApp(contender: WorkerContender, redisUrl: string): AppProcess {
  return new AppProcess(contender, 'nest-worker.ts', [contender, redisUrl, `bench-${contender}`, String(HANDLER_MS)]);
}

// --- measurements ---------------------------------------------------------------------------

export interface StampedeRun {
  runs: number;
  latencies: number[];
  failed: number;
  distinctBodies: number;
}

export async function stampede(port: number, id: string): Promise<StampedeRun> {
  const settled = await Promise.allSettled(Array.from({ length: STAMPEDE_REQUESTS }, () => request(port, `/product?id=${id}`)));
  const ok = settled.flatMap((s) => (s.status === 'fulfilled' && s.value.status === 200 ? [s.value] : []));
  const runs = JSON.parse((await request(port, `/runs?id=${id}`)).text) as { runs: number };
  return {
    runs: runs.runs,
    latencies: ok.map((r) => r.ms),
    failed: STAMPEDE_REQUESTS - ok.length,
    distinctBodies: new Set(ok.map((r) => r.text)).size,
  };
}

export function hits(port: number, seconds: number): Promise<HitRun> {
  return measureHits(port, '/product?id=hot', { seconds, connections: HIT_CONNECTIONS });
}

// --- main -----------------------------------------------------------------------------------

export default async function nestBench(ctx: BenchContext): Promise<string> {
  const started = Date.now();
  const stampedeRepeats = ctx.quick ? 2 : 4;
  const hitRepeats = ctx.quick ? 2 : 4;
  const hitSeconds = ctx.quick ? 2 : 3;
  const load0 = os.loadavg()[0]!;
  const redis: RedisServer = await startRedis();
  const apps: AppProcess[] = [];
  try {
    for (const c of CONTENDERS) apps.push(newApp(c.id, redis.url));
    const ports = new Map<ContenderId, number>();
    for (const [i, app] of apps.entries()) ports.set(CONTENDERS[i]!.id, await app.ready);
    const rotate = (r: number) => CONTENDERS.map((_, i) => CONTENDERS[(i + r) % CONTENDERS.length]!);

    // Warm-up: both code paths, so that the first measured stampede is not also the first request.
    for (const c of CONTENDERS) {
      const port = ports.get(c.id)!;
      await stampede(port, `warmup-${process.pid}`);
      await request(port, '/product?id=hot');
      const hit = await request(port, '/product?id=hot');
      if (hit.xCache !== 'HIT') throw new Error(`${c.id}: expected a HIT for the warm key, got ${String(hit.xCache)}`);
      await hits(port, 1);
    }

    const cold = new Map<ContenderId, StampedeRun[]>();
    for (let r = 0; r < stampedeRepeats; r++) {
      for (const c of rotate(r)) {
        const run = await stampede(ports.get(c.id)!, `cold-${r}-${Date.now().toString(36)}`);
        cold.set(c.id, [...(cold.get(c.id) ?? []), run]);
        ctx.log(
          `stampede #${r + 1} ${c.id}: ${run.runs} handler runs, p99 ${percentile(run.latencies, 99).toFixed(0)} ms` +
            `${run.failed ? `, ${run.failed} failed` : ''}${run.distinctBodies > 1 ? `, ${run.distinctBodies} distinct bodies` : ''}`,
        );
      }
    }

    const warm = new Map<ContenderId, HitRun[]>();
    for (let r = 0; r < hitRepeats; r++) {
      for (const c of rotate(r)) {
        const run = await hits(ports.get(c.id)!, hitSeconds);
        warm.set(c.id, [...(warm.get(c.id) ?? []), run]);
        ctx.log(`hits #${r + 1} ${c.id}: ${run.rps.toFixed(0)} req/s, p99 ${run.p99} ms, ${run.cpuPerRequest.toFixed(0)} µs CPU/request${run.bad ? `, ${run.bad} bad` : ''}`);
      }
    }

    return report(cold, warm, { stampedeRepeats, hitRepeats, hitSeconds, seconds: (Date.now() - started) / 1000, load: [load0, os.loadavg()[0]!] });
  } finally {
    await Promise.all(apps.map((a) => a.endInput()));
    await redis.stop();
  }
}

// --- report ---------------------------------------------------------------------------------

function report(
  cold: Map<ContenderId, StampedeRun[]>,
  warm: Map<ContenderId, HitRun[]>,
  o: { stampedeRepeats: number; hitRepeats: number; hitSeconds: number; seconds: number; load: [number, number] },
): string {
  const int = (v: number[]) => summary(v, 0);
  const stat = (id: ContenderId) => {
    const runs = cold.get(id) ?? [];
    return {
      runs: runs.map((r) => r.runs),
      p50: runs.map((r) => percentile(r.latencies, 50)),
      p99: runs.map((r) => percentile(r.latencies, 99)),
      failed: runs.reduce((a, r) => a + r.failed, 0),
      distinct: Math.max(0, ...runs.map((r) => r.distinctBodies)),
      rps: (warm.get(id) ?? []).map((r) => r.rps),
      hitP99: (warm.get(id) ?? []).map((r) => r.p99),
      cpu: (warm.get(id) ?? []).map((r) => r.cpuPerRequest),
      bad: (warm.get(id) ?? []).reduce((a, r) => a + r.bad, 0),
    };
  };
  const cm = stat('cache-manager');
  const dp = stat('dogpile');
  const lines = [
    '## NestJS: `@Cached` vs `@nestjs/cache-manager` `CacheInterceptor`',
    '',
    `One NestJS 12 app per contender (Express platform, its own process), the same route (\`GET /product?id=\`, a ${HANDLER_MS} ms handler returning a ~300-byte JSON object), TTL 60 s, all on one Redis. ` +
      `Machine: ${os.cpus().length} cores shared by Redis, the app and the load generator. Medians over repeats, min–max in brackets.`,
    '',
    `### Cold stampede: ${STAMPEDE_REQUESTS} concurrent requests to an uncached key (${o.stampedeRepeats} repeats)`,
    '',
    '| contender | handler runs | client p50 (ms) | client p99 (ms) | failed requests | distinct bodies |',
    '|---|---|---|---|---|---|',
    ...CONTENDERS.map((c) => {
      const s = stat(c.id);
      return `| ${c.name} | ${int(s.runs)} | ${int(s.p50)} | ${int(s.p99)} | ${s.failed} | ${s.distinct} |`;
    }),
    '',
    `Handler runs, cache-manager / dogpile-guard: ${ratio(median(cm.runs), median(dp.runs), 0)}; client p99, dogpile-guard / cache-manager: ${ratio(median(dp.p99), median(cm.p99))}.`,
    '',
    `### Hits: autocannon, ${HIT_CONNECTIONS} connections, ${o.hitSeconds} s per run on a warm key (${o.hitRepeats} repeats)`,
    '',
    '| contender | req/s | vs cache-manager | p99 latency (ms) | app CPU per request (µs) | vs cache-manager | non-2xx / errors |',
    '|---|---|---|---|---|---|---|',
    ...CONTENDERS.map((c) => {
      const s = stat(c.id);
      return `| ${c.name} | ${int(s.rps)} | ${ratio(median(s.rps), median(cm.rps))} | ${int(s.hitP99)} | ${int(s.cpu)} | ${ratio(median(s.cpu), median(cm.cpu))} | ${s.bad} |`;
    }),
    '',
    `Targets (issue 5): 1 handler run where cache-manager runs ~${STAMPEDE_REQUESTS} — measured ${int(dp.runs)} vs ${int(cm.runs)}; ` +
      `hit throughput at least equal — measured ${ratio(median(dp.rps), median(cm.rps))} of cache-manager's req/s and ${ratio(median(dp.cpu), median(cm.cpu))} of its CPU per request ` +
      `(Redis only; with \`l1\`: ${ratio(median(stat('dogpile-l1').rps), median(cm.rps))} and ${ratio(median(stat('dogpile-l1').cpu), median(cm.cpu))}).`,
    '',
    `Notes: \`CacheInterceptor\` does a get, then runs the handler and sets the value, with no lock, so every request that misses runs the handler. ` +
      `\`@Cached\` goes through \`DogpileCache.resolve\`: one Lua round trip per hit (look up or lead), v8 deserialisation, and one handler run per key for all concurrent misses. ` +
      `The app, Redis and autocannon share the machine's cores (load average ${o.load[0].toFixed(1)} at the start, ${o.load[1].toFixed(1)} at the end of this section), ` +
      `so req/s moves with whatever else runs; CPU per request, measured in the app process, moves much less. Compare ratios, not absolute values. ` +
      `Section written in ${o.seconds.toFixed(0)} s.`,
  ];
  return lines.join('\n');
}
