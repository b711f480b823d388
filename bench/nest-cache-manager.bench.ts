/**
 * NestJS, migrating by one import: `@nestjs/cache-manager`'s `CacheInterceptor` (cache-manager
 * 7 + Keyv + @keyv/redis) against the same app on `dogpile-guard/nest/cache-manager`, on the
 * same route, the same Redis and the same NestJS 12 app (Express platform), each app in its own
 * process (`bench/nest-worker.ts`, contenders `cache-manager` and `dogpile-cache-manager`):
 *
 * - cold stampede: concurrent requests to a key nobody has cached, handler 200 ms — how many
 *   times the handler runs, and the latency the clients see;
 * - hits: requests per second on a warm key, with autocannon.
 *
 * The stampede and hit measurements are `nest.bench.ts`'s.
 */
import os from 'node:os';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { median, percentile, ratio, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import type { AppProcess, HitRun } from './lib/app-process.js';
import { HANDLER_MS, HIT_CONNECTIONS, hits, newApp, request, stampede, STAMPEDE_REQUESTS, type StampedeRun } from './nest.bench.js';

const CONTENDERS = [
  { id: 'cache-manager', name: '`@nestjs/cache-manager` (cache-manager 7 + Keyv + @keyv/redis)' },
  { id: 'dogpile-cache-manager', name: '`dogpile-guard/nest/cache-manager` (`redis`)' },
] as const;
type ContenderId = (typeof CONTENDERS)[number]['id'];

export default async function nestCacheManagerBench(ctx: BenchContext): Promise<string> {
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
        ctx.log(`stampede #${r + 1} ${c.id}: ${run.runs} handler runs, p99 ${percentile(run.latencies, 99).toFixed(0)} ms${run.failed ? `, ${run.failed} failed` : ''}`);
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
      p99: runs.map((r) => percentile(r.latencies, 99)),
      failed: runs.reduce((a, r) => a + r.failed, 0),
      rps: (warm.get(id) ?? []).map((r) => r.rps),
      hitP99: (warm.get(id) ?? []).map((r) => r.p99),
      cpu: (warm.get(id) ?? []).map((r) => r.cpuPerRequest),
      bad: (warm.get(id) ?? []).reduce((a, r) => a + r.bad, 0),
    };
  };
  const cm = stat('cache-manager');
  const dp = stat('dogpile-cache-manager');
  return [
    '## NestJS: `@nestjs/cache-manager` and its drop-in `dogpile-guard/nest/cache-manager`',
    '',
    `The same NestJS 12 app (Express platform, its own process) with one import changed: \`GET /product?id=\` under \`CacheInterceptor\` and \`@CacheTTL(60_000)\`, a ${HANDLER_MS} ms handler, all on one Redis ` +
      `(\`npm run bench -- nest-cache-manager\`). Machine: ${os.cpus().length} cores shared by Redis, the apps and the load generator. Medians over repeats, min–max in brackets.`,
    '',
    `| contender | handler runs, ${STAMPEDE_REQUESTS} cold requests | client p99 (ms) | failed | warm req/s (${HIT_CONNECTIONS} connections, ${o.hitSeconds} s) | hit p99 (ms) | app CPU per hit (µs) | non-2xx |`,
    '|---|---|---|---|---|---|---|---|',
    ...CONTENDERS.map((c) => {
      const s = stat(c.id);
      return `| ${c.name} | ${int(s.runs)} | ${int(s.p99)} | ${s.failed} | ${int(s.rps)} | ${int(s.hitP99)} | ${int(s.cpu)} | ${s.bad} |`;
    }),
    '',
    `Handler runs, \`@nestjs/cache-manager\` / drop-in: ${ratio(median(cm.runs), median(dp.runs), 0)}. Ratios, drop-in / \`@nestjs/cache-manager\`: cold client p99 ${ratio(median(dp.p99), median(cm.p99))}, ` +
      `warm req/s ${ratio(median(dp.rps), median(cm.rps))}, hit p99 ${ratio(median(dp.hitP99), median(cm.hitP99))}, CPU per hit ${ratio(median(dp.cpu), median(cm.cpu))} ` +
      `(${o.stampedeRepeats} stampedes and ${o.hitRepeats} hit runs per contender).`,
    '',
    `Notes: the reference's interceptor reads, runs the handler on a miss and writes, so every request that misses runs it; the drop-in's goes through \`DogpileCache.resolve\` (one Lua round trip per hit, look up or lead). ` +
      `Load average ${o.load[0].toFixed(1)} at the start, ${o.load[1].toFixed(1)} at the end; compare ratios, not absolute values. Section written in ${o.seconds.toFixed(0)} s.`,
  ].join('\n');
}
