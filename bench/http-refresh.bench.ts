/**
 * Background refresh of stale HTTP responses (`refresh: 'background' | 'foreground'`, see
 * docs/http-refresh.md), and what a cache hit costs against the bare route, in one run:
 *
 * 1. HTTP expiry cliff: 4 Express processes (`bench/http-refresh-worker.ts`, `dogpileGuard`)
 *    sharing one Redis (`createCache({ redis: url })`), a route whose handler takes 100 ms,
 *    8 hot URLs, `ttl: '1s'`, `staleWhileRevalidate: '1m'`. After a first fill, an open-loop
 *    sender in this process fires requests on a fixed schedule (200 req/s over the 4
 *    processes and the 8 URLs) whether or not the earlier ones were answered, over keep-alive
 *    sockets opened beforehand. Once with `refresh: 'background'` (the default), once with
 *    `refresh: 'foreground'`, each in 4 fresh processes.
 * 2. Hits: autocannon on a warm `GET /hit` (~1 KB of JSON), the cached route against the bare
 *    route sending the same bytes (prepared once), per adapter (Express, Fastify, Hono on
 *    @hono/node-server through `bench/hono-worker.ts`) and per store (in-process cache, Redis,
 *    Redis + `l1`).
 *
 * `npm run bench -- http-refresh` (`BENCH_QUICK=1`: shorter). For investigation:
 * `HTTP_REFRESH_ONLY=cliff` (or `hits`) runs one part (the section then lacks the other),
 * `HTTP_REFRESH_DUMP=<file>` writes every request of the cliff runs there as JSON.
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { median, percentile, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';
import { AppProcess, measureHits, type HitRun } from './lib/app-process.js';

const HANDLER_MS = 100;
const PROCESSES = 4;
const URLS = 8;
/** Requests per second fired by the open-loop sender, over all processes and URLs. */
const RATE = 200;
/** A request that took at least this long (from its scheduled start) probably waited for a handler. */
const SLOW_MS = 90;
const HIT_CONNECTIONS = 50;
/** Every app process sees the same Host header, as behind a load balancer (the host is part of the key). */
const HOST_HEADER = 'shop.example';

type RefreshMode = 'background' | 'foreground';

const request = (port: number, urlPath: string, agent: http.Agent | false = false, headers: Record<string, string> = {}): Promise<Reply> =>
  fetchReply(port, urlPath, { agent, headers: { host: HOST_HEADER, ...headers }, timeoutMs: 30_000 });

interface Counters {
  micros: number;
  runs: { client: number; other: number };
}
const counters = async (port: number): Promise<Counters> => JSON.parse((await request(port, '/cpu')).text) as Counters;

// --- 1. the HTTP expiry cliff -----------------------------------------------------------------

interface Sample {
  /** Scheduled start, ms after the first request's. */
  due: number;
  /** How late the sender sent it against its schedule (ms). */
  lag: number;
  /** From the scheduled start to the last byte (ms); NaN when it failed. */
  latency: number;
  status: number;
  xCache: string;
  /** Index of the process and of the URL it went to. */
  process: number;
  url: number;
  error?: string;
}

interface CliffRun {
  mode: RefreshMode;
  samples: Sample[];
  /** Handler runs per process during the measured window: for a client's request, and the others (background refreshes). */
  runs: { client: number; other: number }[];
  /** Handler runs per process for the first fill. */
  fillRuns: number;
  seconds: number;
}

/**
 * Fires `total` requests, one every 1000 / RATE ms, whether or not the earlier ones have been
 * answered; request i is for URL i mod 8 and goes to process (i + ⌊i / 8⌋) mod 4: each URL is
 * asked every 40 ms fleet-wide, by the processes in turn, and each process gets every 4th
 * request. When the timer wakes late, every request already due goes at once.
 */
async function openLoop(ports: number[], agent: http.Agent, total: number, ids: string[]): Promise<Sample[]> {
  const interval = 1000 / RATE;
  const samples: Sample[] = new Array(total);
  const pending: Promise<void>[] = [];
  const t0 = performance.now() + 20;
  const fire = (i: number) => {
    const due = t0 + i * interval;
    const processIndex = (i + Math.floor(i / ids.length)) % ports.length;
    const port = ports[processIndex]!;
    const id = ids[i % ids.length]!;
    const lag = performance.now() - due;
    pending.push(
      new Promise<void>((resolve) => {
        const done = (s: Omit<Sample, 'due' | 'lag' | 'process' | 'url'>) => {
          samples[i] = { due: due - t0, lag, process: processIndex, url: i % ids.length, ...s };
          resolve();
        };
        const req = http.request(
          { host: '127.0.0.1', port, path: `/item/${id}`, agent, headers: { host: HOST_HEADER, 'x-bench-client': '1' } },
          (res) => {
            res.on('data', () => {});
            res.on('error', (err) => done({ latency: Number.NaN, status: 0, xCache: '', error: err.message }));
            res.on('end', () => done({ latency: performance.now() - due, status: res.statusCode ?? 0, xCache: String(res.headers['x-cache'] ?? '') }));
          },
        );
        req.setTimeout(30_000, () => req.destroy(new Error('request timed out')));
        req.on('error', (err) => done({ latency: Number.NaN, status: 0, xCache: '', error: err.message }));
        req.end();
      }),
    );
  };
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total && t0 + next * interval <= now) fire(next++);
      if (next >= total) resolve();
      else setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
  await Promise.all(pending);
  return samples;
}

async function cliff(redis: RedisServer, mode: RefreshMode, seconds: number, log: (msg: string) => void): Promise<CliffRun> {
  await redis.command('FLUSHALL');
  const apps = Array.from({ length: PROCESSES }, (_, i) => new AppProcess(`cliff-${mode}-${i}`, 'http-refresh-worker.ts', [`cliff-${mode}`, redis.url, String(HANDLER_MS)]));
  // Enough sockets per process that no request queues behind another: at 50 req/s per process,
  // the ones waiting for a 100 ms handler need about 5.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 64 });
  try {
    const ports = await Promise.all(apps.map((a) => a.ready));
    // Open the sockets and warm each process's paths (an uncached route) before the fill.
    await Promise.all(ports.flatMap((port) => Array.from({ length: 16 }, () => request(port, '/ping', agent))));
    const ids = Array.from({ length: URLS }, (_, i) => `p${i + 1}-${mode}`);
    // The first fill: one request per URL, then every process sees the stored response.
    await Promise.all(ids.map((id, i) => request(ports[i % PROCESSES]!, `/item/${id}`, agent, { 'x-bench-client': '1' })));
    for (const port of ports) {
      for (const id of ids) {
        let last: string | undefined;
        for (let k = 0; k < 10 && last !== 'HIT'; k++) last = (await request(port, `/item/${id}`, agent)).xCache;
        if (last !== 'HIT') throw new Error(`cliff-${mode}: expected X-Cache: HIT after the fill on /item/${id}, got ${String(last)}`);
      }
    }
    const before = await Promise.all(ports.map(counters));
    const fillRuns = before.reduce((n, c) => n + c.runs.client + c.runs.other, 0);
    const samples = await openLoop(ports, agent, Math.round(RATE * seconds), ids);
    const after = await Promise.all(ports.map(counters));
    const run: CliffRun = {
      mode,
      samples,
      runs: after.map((a, i) => ({ client: a.runs.client - before[i]!.runs.client, other: a.runs.other - before[i]!.runs.other })),
      fillRuns,
      seconds,
    };
    const s = cliffStats(run);
    log(
      `cliff ${mode}: ${s.requests} requests, waited (MISS/COALESCED) ${s.waited}, ≥ ${SLOW_MS} ms ${s.slow}, handler runs ${s.runsTotal} (${s.runsPerProcess}), ` +
        `p50 ${s.p50.toFixed(1)} p99 ${s.p99.toFixed(1)} p99.9 ${s.p999.toFixed(1)} max ${s.max.toFixed(1)} ms, X-Cache ${s.xCache}, lag p99 ${s.lag99.toFixed(1)} ms${s.errors ? `, ${s.errors} errors` : ''}`,
    );
    return run;
  } finally {
    agent.destroy();
    await Promise.all(apps.map((a) => a.endInput()));
  }
}

interface CliffStats {
  requests: number;
  errors: number;
  waited: number;
  miss: number;
  coalesced: number;
  slow: number;
  runsTotal: number;
  runsBackground: number;
  runsPerProcess: string;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  lag99: number;
  xCache: string;
}

function cliffStats(run: CliffRun): CliffStats {
  const ok = run.samples.filter((s) => s.error === undefined && s.status === 200);
  const lat = ok.map((s) => s.latency);
  const byXCache = new Map<string, number>();
  for (const s of ok) byXCache.set(s.xCache || '(none)', (byXCache.get(s.xCache || '(none)') ?? 0) + 1);
  const miss = byXCache.get('MISS') ?? 0;
  const coalesced = byXCache.get('COALESCED') ?? 0;
  return {
    requests: run.samples.length,
    errors: run.samples.length - ok.length,
    waited: miss + coalesced,
    miss,
    coalesced,
    slow: lat.filter((l) => l >= SLOW_MS).length,
    runsTotal: run.runs.reduce((n, r) => n + r.client + r.other, 0),
    runsBackground: run.runs.reduce((n, r) => n + r.other, 0),
    runsPerProcess: run.runs.map((r) => r.client + r.other).join(' / '),
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    p999: percentile(lat, 99.9),
    max: lat.length ? Math.max(...lat) : Number.NaN,
    lag99: percentile(run.samples.map((s) => s.lag), 99),
    xCache: ['HIT', 'STALE', 'MISS', 'COALESCED', '(none)'].filter((k) => byXCache.has(k)).map((k) => `${k} ${byXCache.get(k)}`).join(', '),
  };
}

// --- 2. hits against the bare route -------------------------------------------------------------

type Adapter = 'express' | 'fastify' | 'hono';
type Store = 'memory' | 'redis' | 'redis-l1';
const ADAPTERS: Adapter[] = ['express', 'fastify', 'hono'];
const STORES: Store[] = ['memory', 'redis', 'redis-l1'];
const ADAPTER_NAMES: Record<Adapter, string> = {
  express: 'Express 5 + `dogpileGuard`',
  fastify: 'Fastify 5 + `dogpileGuardPlugin`',
  hono: 'Hono 4 on @hono/node-server + `dogpileGuard`',
};
const STORE_NAMES: Record<Store, string> = {
  memory: 'in-process (`createCache()`)',
  redis: 'Redis',
  'redis-l1': 'Redis + `l1`',
};

/**
 * The apps of an adapter besides its cached routes: `bare`, the route sending the hit's body
 * with the framework's usual call; `same`, the route sending the hit's body and header fields
 * (`X-Cache`, `Age`, `Cache-Status`, `Content-Length`): the same bytes; `ceiling`, the shape of
 * the adapter's cache in front of the route (middleware, hooks) answering with those bytes from
 * a `Map`, no cache: what any cache built that way can reach.
 */
type Baseline = 'bare' | 'same' | 'ceiling';
const BASELINES: Baseline[] = ['bare', 'same', 'ceiling'];
type Variant = Baseline | Store;
const BASELINE_CONTENDERS: Record<Adapter, Record<Baseline, string>> = {
  express: { bare: 'express-bytes', same: 'express-same', ceiling: 'express-map' },
  fastify: { bare: 'fastify-bytes', same: 'fastify-same', ceiling: 'fastify-map' },
  hono: { bare: 'hono-bytes', same: 'hono-same', ceiling: 'hono-map' },
};
const isBaseline = (variant: Variant): variant is Baseline => (BASELINES as string[]).includes(variant);

/** The app process of one variant of an adapter. */
function hitApp(redis: RedisServer, adapter: Adapter, variant: Variant): AppProcess {
  const contender = isBaseline(variant) ? BASELINE_CONTENDERS[adapter][variant] : variant === 'memory' ? `${adapter}-dogpile` : `${adapter}-dogpile-${variant}`;
  return adapter === 'hono'
    ? new AppProcess(contender, 'hono-worker.ts', [contender, redis.url, String(HANDLER_MS)])
    : new AppProcess(contender, 'http-refresh-worker.ts', [contender, redis.url, String(HANDLER_MS)]);
}

interface HitCell {
  runs: HitRun[];
  /** Per repeat: req/s of this app ÷ req/s of the bare route in the same repeat. */
  ratios: number[];
  /** Per repeat: req/s of this app ÷ req/s of the route sending the same bytes (`same`) in the same repeat. */
  sameRatios: number[];
  /** Handler runs of the cached route during the measured runs (Express and Fastify; undefined for Hono). */
  handlerRuns: number | undefined;
  bodyBytes: number;
}

async function hitsBench(redis: RedisServer, repeats: number, seconds: number, log: (msg: string) => void) {
  const results = new Map<string, HitCell>();
  for (const adapter of ADAPTERS) {
    const variants: Variant[] = [...BASELINES, ...STORES];
    const apps = variants.map((variant) => hitApp(redis, adapter, variant));
    try {
      const ports = await Promise.all(apps.map((a) => a.ready));
      const bodies = new Map<Variant, Buffer>();
      for (const [i, variant] of variants.entries()) {
        const port = ports[i]!;
        const first = await request(port, '/hit');
        if (!isBaseline(variant)) {
          // Right after the first response the store may still be on its way to Redis (COALESCED).
          let last: Reply | undefined;
          for (let k = 0; k < 10 && last?.xCache !== 'HIT'; k++) last = await request(port, '/hit');
          if (last?.xCache !== 'HIT') throw new Error(`${adapter}-${variant}: expected X-Cache: HIT on the warm route, got ${String(last?.xCache)}`);
          bodies.set(variant, last.body);
        } else {
          if (variant !== 'bare' && first.xCache !== 'HIT') throw new Error(`${adapter}-${variant}: expected the hit's X-Cache field, got ${String(first.xCache)}`);
          bodies.set(variant, first.body);
        }
        await measureHits(port, '/hit', { seconds: 0.5, connections: HIT_CONNECTIONS, host: HOST_HEADER });
      }
      const bare = bodies.get('bare')!;
      for (const variant of variants) if (!bodies.get(variant)!.equals(bare)) throw new Error(`${adapter}-${variant}: the body differs from the bare route's`);
      const runsBefore = await Promise.all(ports.map((p, i) => (adapter === 'hono' || isBaseline(variants[i]!) ? undefined : counters(p))));
      const byVariant = variants.map(() => [] as HitRun[]);
      for (let r = 0; r < repeats; r++) {
        // Rotated, so no variant always runs first (or right after the same neighbour).
        for (let j = 0; j < variants.length; j++) {
          const i = (j + r) % variants.length;
          const run = await measureHits(ports[i]!, '/hit', { seconds, connections: HIT_CONNECTIONS, host: HOST_HEADER });
          byVariant[i]!.push(run);
          log(`hits #${r + 1} ${adapter} ${variants[i]}: ${run.rps.toFixed(0)} req/s, p99 ${run.p99} ms, ${run.cpuPerRequest.toFixed(0)} µs CPU/req${run.bad ? `, ${run.bad} bad` : ''}`);
        }
      }
      const runsAfter = await Promise.all(ports.map((p, i) => (adapter === 'hono' || isBaseline(variants[i]!) ? undefined : counters(p))));
      const same = variants.indexOf('same');
      for (const [i, variant] of variants.entries()) {
        const before = runsBefore[i];
        const after = runsAfter[i];
        results.set(`${adapter}/${variant}`, {
          runs: byVariant[i]!,
          ratios: byVariant[i]!.map((run, r) => run.rps / byVariant[0]![r]!.rps),
          sameRatios: byVariant[i]!.map((run, r) => run.rps / byVariant[same]![r]!.rps),
          handlerRuns: before && after ? after.runs.client + after.runs.other - before.runs.client - before.runs.other : undefined,
          bodyBytes: bare.length,
        });
      }
    } finally {
      await Promise.all(apps.map((a) => a.endInput()));
    }
  }
  return results;
}

// --- main ---------------------------------------------------------------------------------------

export default async function httpRefreshBench(ctx: BenchContext): Promise<string> {
  const started = performance.now();
  const cliffSeconds = ctx.quick ? 4 : 8;
  const hitRepeats = ctx.quick ? 1 : 5;
  const hitSeconds = ctx.quick ? 1 : 1.5;
  const load0 = os.loadavg()[0]!;
  const redis = await startRedis();
  const only = process.env.HTTP_REFRESH_ONLY;
  const cliffRuns: CliffRun[] = [];
  let hits = new Map<string, HitCell>();
  try {
    if (only !== 'hits') {
      for (const mode of ['background', 'foreground'] as RefreshMode[]) cliffRuns.push(await cliff(redis, mode, cliffSeconds, ctx.log));
      ctx.log(`cliff done after ${((performance.now() - started) / 1000).toFixed(1)} s`);
      if (process.env.HTTP_REFRESH_DUMP) writeFileSync(process.env.HTTP_REFRESH_DUMP, JSON.stringify(cliffRuns));
    }
    if (only !== 'cliff') hits = await hitsBench(redis, hitRepeats, hitSeconds, ctx.log);
  } finally {
    await redis.stop();
  }
  const load1 = os.loadavg()[0]!;
  const took = (performance.now() - started) / 1000;

  // --- report -----------------------------------------------------------------------------------
  const pct = (k: number, n: number) => `${((100 * k) / Math.max(1, n)).toFixed(2)}%`;
  const f1 = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(1));
  const stats = new Map(cliffRuns.map((r) => [r.mode, cliffStats(r)] as const));
  const cliffRows = cliffRuns.map((run) => {
    const s = stats.get(run.mode)!;
    return (
      `| \`refresh: '${run.mode}'\`${run.mode === 'background' ? ' (default)' : ''} | ${s.requests}${s.errors ? ` (${s.errors} failed)` : ''} | ` +
      `${s.waited} (${pct(s.waited, s.requests)}) | ${s.slow} (${pct(s.slow, s.requests)}) | ${s.runsTotal} (${s.runsPerProcess}) | ${s.runsBackground} | ` +
      `${f1(s.p50)} | ${f1(s.p99)} | ${f1(s.p999)} | ${f1(s.max)} | ${s.xCache} | ${f1(s.lag99)} |`
    );
  });
  const nominalRefreshes = URLS * (cliffSeconds / 1);

  const hitRows: string[] = [];
  const BASELINE_ROWS: Record<Baseline, (bytes: number) => string> = {
    bare: (bytes) => `bare route sending the body (${bytes} bytes)`,
    same: () => 'bare route sending the body and the header fields of a hit: the same bytes',
    ceiling: () => "the adapter's shape (middleware / hooks) sending those bytes, no cache",
  };
  for (const adapter of hits.size ? ADAPTERS : []) {
    const bare = hits.get(`${adapter}/bare`)!;
    const bareCpu = median(bare.runs.map((r) => r.cpuPerRequest));
    const row = (label: string, store: string, cell: HitCell, bold: boolean) => {
      const bad = cell.runs.reduce((n, r) => n + r.bad, 0);
      const b = (text: string) => (bold ? `**${text}**` : text);
      return (
        `| ${label} | ${store} | ${summary(cell.runs.map((r) => r.rps), 0)} | ${summary(cell.runs.map((r) => r.p99), 0)} | ` +
        `${summary(cell.runs.map((r) => r.cpuPerRequest), 0)} | ${summary(cell.ratios, 2)} | ${b(summary(cell.sameRatios, 2))} | ${(median(cell.runs.map((r) => r.cpuPerRequest)) / bareCpu).toFixed(2)} | ` +
        `${cell.handlerRuns ?? 'n/a'}${bad ? ` (${bad} errors)` : ''} |`
      );
    };
    for (const baseline of BASELINES) {
      hitRows.push(row(`${ADAPTER_NAMES[adapter].split(' + ')[0]}, ${BASELINE_ROWS[baseline](bare.bodyBytes)}`, '—', hits.get(`${adapter}/${baseline}`)!, false));
    }
    for (const store of STORES) hitRows.push(row(ADAPTER_NAMES[adapter], STORE_NAMES[store], hits.get(`${adapter}/${store}`)!, true));
  }

  const verdicts: string[] = [];
  const met = (ok: boolean) => (ok ? '**met**' : '**missed**');
  const bg = stats.get('background');
  const fg = stats.get('foreground');
  if (bg && fg) {
    verdicts.push(
      `- 0 requests waited for a handler after the first fill with \`refresh: 'background'\`: ${met(bg.waited === 0 && bg.errors === 0)} — ${bg.waited} of ${bg.requests} ` +
        `(${pct(bg.waited, bg.requests)}) answered \`X-Cache: MISS\` or \`COALESCED\`, against ${fg.waited} (${pct(fg.waited, fg.requests)}) with \`refresh: 'foreground'\`; ` +
        `by latency, ${bg.slow} took ≥ ${SLOW_MS} ms (foreground ${fg.slow}). p99 ${f1(bg.p99)} ms against ${f1(fg.p99)} ms in the foreground, p99.9 ${f1(bg.p999)} against ${f1(fg.p999)} ms.`,
    );
  }
  for (const adapter of hits.size ? ADAPTERS : []) {
    const ceiling = hits.get(`${adapter}/ceiling`)!;
    for (const store of ['memory', 'redis-l1'] as Store[]) {
      const cell = hits.get(`${adapter}/${store}`)!;
      const r = median(cell.sameRatios);
      verdicts.push(
        `- ${ADAPTER_NAMES[adapter]}, ${STORE_NAMES[store]}: hit ≥ 0.95× the req/s of the bare route sending the same bytes ${met(r >= 0.95)} — ${summary(cell.sameRatios, 2)}× ` +
          `(${summary(cell.ratios, 2)}× the route sending the body alone; the adapter's shape with no cache at all reaches ${summary(ceiling.sameRatios, 2)}×).`,
      );
    }
  }

  const intro = [
    "## Background refresh of stale HTTP responses, and hits against the bare route (`bench/http-refresh.bench.ts`)",
    '',
    `What \`refresh: 'background'\` (the default of the HTTP adapters, docs/http-refresh.md) buys when hot URLs keep expiring under steady traffic, against \`refresh: 'foreground'\`; ` +
      `and what a cache hit costs against the framework's own route sending the same bytes, per adapter and store. ` +
      `Run with \`npm run bench -- http-refresh\` (\`BENCH_QUICK=1\` for a shorter run)${ctx.quick ? ' — this was a quick run' : ''}. ` +
      `Every app in its own Node process; the senders (an open-loop client, autocannon) in the benchmark process; one throwaway Redis; all on loopback, on ${os.cpus().length} cores ` +
      `(load average ${load0.toFixed(1)} at the start, ${load1.toFixed(1)} at the end). One run of everything, ${took.toFixed(0)} s.`,
  ];
  const cliffPart =
    cliffRuns.length === 0
      ? ['', '(`HTTP_REFRESH_ONLY=hits`: the expiry cliff was not run.)']
      : [
          '',
          `### HTTP expiry cliff: ${PROCESSES} Express processes on one Redis, ${URLS} hot URLs, handler ${HANDLER_MS} ms, \`ttl: '1s'\`, \`staleWhileRevalidate: '1m'\``,
          '',
          `- Each contender: ${PROCESSES} fresh processes, \`createCache({ redis: url })\` and \`dogpileGuard({ cache, ttl: '1s', staleWhileRevalidate: '1m', refresh })\` on \`GET /item/:id\`, ` +
            `whose handler waits ${HANDLER_MS} ms (a timer); Redis flushed between contenders.`,
          `- First fill: one request per URL, then each process asked each URL until it answered \`X-Cache: HIT\` (not measured). Then ${cliffSeconds} s of open loop: ` +
            `request *i* is sent at \`start + i × ${1000 / RATE} ms\` (${RATE} req/s) for URL *i* mod ${URLS} to process (*i* + ⌊*i* / ${URLS}⌋) mod ${PROCESSES} — ` +
            `each URL asked every ${(URLS * 1000) / RATE} ms fleet-wide, by the processes in turn — whether or not earlier requests were answered, ` +
            `over keep-alive sockets opened beforehand (up to 64 per process). Latency runs from the scheduled start to the last byte (the sender's own lateness included: *lag p99*).`,
          `- *Waited*: answered \`X-Cache: MISS\` (this request ran its handler) or \`COALESCED\` (it waited for another request's run) — the honest count. ` +
            `*≥ ${SLOW_MS} ms*: the latency criterion, which would also catch CPU stalls on this shared machine. ` +
            `*Handler runs*: counted in each process by the route itself during the measured window, total (per process); *background*: runs for a request no client sent (a refresh). ` +
            `With a 1 s TTL and ${HANDLER_MS} ms refreshes, one refresh per URL per expiry is about ${Math.round(nominalRefreshes / 1.1)}–${nominalRefreshes} runs.`,
          '',
          '| refresh | requests | waited for a handler (X-Cache MISS / COALESCED) | ≥ 90 ms | handler runs (per process) | of which background | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | X-Cache | lag p99 (ms) |',
          '|---|---|---|---|---|---|---|---|---|---|---|---|',
          ...cliffRows,
          ...(bg && bg.miss > 0
            ? [
                '',
                `With \`refresh: 'background'\`, ${bg.miss} request(s) ran their own handler (\`X-Cache: MISS\`) though every stored response was inside its stale window. ` +
                  "In the runs made while writing this benchmark, `NODE_DEBUG=dogpile-guard` showed each such request leading the key `<key>\\n#revalidate`, i.e. the guard's revalidation path " +
                  "(`serveValue` in src/http/flow/guard.ts, a stored response past its own freshness answered as a `HIT`), not the stale-window refresh: " +
                  "the stored response's freshness is counted from when the handler produced it, the cache entry's TTL from when it was written, so for a few milliseconds after each expiry " +
                  "the cache still answers `HIT` while the response is already stale, and that path runs the handler in the foreground whatever `refresh` says.",
              ]
            : []),
        ];
  const hitsPart =
    hits.size === 0
      ? ['', '(`HTTP_REFRESH_ONLY=cliff`: the hits were not run.)']
      : [
          '',
          `### Hits: \`GET /hit\` (~1 KB of JSON), autocannon ${HIT_CONNECTIONS} connections, ${hitRepeats} × ${hitSeconds} s per app`,
          '',
          "- The bare route sends a Buffer prepared once, with the framework's usual call (Express `res.set('content-type', …).send(buf)`, which also computes a weak ETag; " +
            "Fastify `reply.header(…).send(buf)`; Hono `c.body(bytes, 200, { 'content-type': … })`, from `bench/hono-worker.ts`). " +
            'The *same bytes* route sends the header fields of a hit too (`X-Cache`, `Age`, `Cache-Status`, `Content-Length`, from `bench/http-refresh-worker.ts` and `bench/hono-worker.ts`): ' +
            "the target (a hit at ≥ 0.95× its req/s) compares a hit with it. The *no cache* row is the adapter's own shape in front of the route (Express and Hono: a middleware answering from a `Map`; " +
            'Fastify: the hooks, the promise and the send of `dogpileGuardPlugin` with a prepared hit taken from a `Map`, `fastify-map` of `npm run bench -- fastify-hooks`) sending those bytes: ' +
            'no cache built that way can do better. ' +
            'The cached route builds and serialises the same JSON, but its handler runs only for the first fill (*handler runs*: during the measured runs, Express and Fastify). ' +
            'The cached body was checked byte for byte equal to the bare one.',
          '- *Ratio*: req/s of the app ÷ req/s of the bare route (or of the route sending the same bytes) of the same adapter in the same repeat (the six apps of an adapter measured one after the other, ' +
            'rotated between repeats); median [min–max] over the repeats. *CPU per request*: the app process\'s own CPU time ÷ requests, steadier than req/s on a machine where ' +
            'autocannon shares the two cores; *CPU ratio*: its median ÷ the bare route\'s (above 1: the hit costs more).',
          '',
          '| app | store | req/s | p99 (ms) | app CPU per request (µs) | req/s ratio vs bare route | req/s ratio vs the same bytes | CPU ratio vs bare route | handler runs |',
          '|---|---|---|---|---|---|---|---|---|',
          ...hitRows,
        ];
  return [...intro, ...cliffPart, ...hitsPart, '', '### Against the targets', '', ...verdicts].join('\n');
}
