/**
 * The expiry cliff (issue 11, "Benchmark"), side by side in one run on one Redis: a fleet of
 * processes calls hot keys on an open-loop schedule while the keys keep expiring, and each
 * contender is judged on how many loader runs each refresh costs fleet-wide, how long callers
 * wait, how many calls a loader blocks and how many are answered with a stale value.
 *
 * The processes are a fleet of `bench/scenarios/expiry-cliff.ts` (four fresh ones per contender);
 * this module coordinates them, reads the loader runs the workers recorded in Redis and writes
 * the markdown section.
 *
 * `CLIFF_BENCH_ONLY=dogpile,bento npm run bench -- expiry-cliff` restricts the run to some
 * contenders (for investigation; the section then lacks the others). `CLIFF_BENCH_DUMP=<file>`
 * writes every contender's raw measurements there as JSON.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import { monotonicMs } from '../tools/fleet/plan.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { percentile } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const PROCESSES = 4;
/** Measured calls still pending this long after the last scheduled start are counted as errors. */
const DRAIN_MS = 15_000;
/** Calls started per second by each process. */
const RATE = 200;
const KEYS = 20;
const TTL_MS = 1000;
const LOADER_MS = 100;
/** Stale window of dogpile-guard's `staleWhileRevalidate`, bentocache's `grace`, async-cache-dedupe's `stale` (s). */
const STALE_S = 10;
/** cache-manager's `refreshThreshold` (ms): 30% of the TTL, the ratio of its README's example (3 s of 10 s). */
const REFRESH_THRESHOLD_MS = 300;
/** A call is "blocked by a loader" when its latency from its scheduled start is above this (half the loader). */
const BLOCKED_MS = LOADER_MS / 2;
/** A lower threshold, reported next to it: a call arriving late in a loader run waits less than BLOCKED_MS. */
const SLOW_MS = 10;
/** Loader runs of one key starting less than this after the first run of a refresh belong to that refresh. */
const REFRESH_WINDOW_MS = TTL_MS / 2;
/** The earlyRefresh target: at most this share of calls answered with a stale value. */
const EARLY_STALE_MAX = 0.02;

interface ContenderDef {
  id: string;
  name: string;
  kind: 'dogpile' | 'peer';
  /** Serves stale values (the targets are checked for these dogpile-guard contenders). */
  stale: boolean;
}

const CONTENDERS: ContenderDef[] = [
  { id: 'dogpile', name: 'dogpile-guard, no stale serving (`createCache({ redis })`)', kind: 'dogpile', stale: false },
  { id: 'dogpile-swr', name: `dogpile-guard, \`staleWhileRevalidate: '${STALE_S}s'\``, kind: 'dogpile', stale: true },
  { id: 'dogpile-early-1', name: `dogpile-guard, \`earlyRefresh: true\` (β = 1) + \`staleWhileRevalidate: '${STALE_S}s'\``, kind: 'dogpile', stale: true },
  { id: 'dogpile-early-2', name: `dogpile-guard, \`earlyRefresh: { beta: 2 }\` + \`staleWhileRevalidate: '${STALE_S}s'\``, kind: 'dogpile', stale: true },
  { id: 'dogpile-early-4', name: `dogpile-guard, \`earlyRefresh: { beta: 4 }\` + \`staleWhileRevalidate: '${STALE_S}s'\``, kind: 'dogpile', stale: true },
  { id: 'bento', name: `bentocache, \`grace: '${STALE_S}s'\`, \`timeout: 0\` (memory L1 + redis L2)`, kind: 'peer', stale: true },
  { id: 'acd', name: `async-cache-dedupe, \`stale: ${STALE_S}\` (redis storage)`, kind: 'peer', stale: true },
  { id: 'cm', name: `cache-manager \`wrap\`, \`refreshThreshold: ${REFRESH_THRESHOLD_MS}\` (Keyv + @keyv/redis)`, kind: 'peer', stale: true },
];

// --- one contender ------------------------------------------------------------------------

interface Run {
  /** The build rejected the option: the contender did not run. */
  unavailable?: string;
  calls: number;
  errors: number;
  errorSamples: string[];
  /** Latency of every measured call from its scheduled start (ms). */
  lat: number[];
  /** How late each measured call started against its schedule (ms): the harness's own delay. */
  lag: number[];
  /** Age of the answered value at the call's start (ms since the loader returned it). */
  age: number[];
  /** dogpile-guard: `resolve()`'s status per call; peers: empty strings. */
  status: string[];
  /** Loader runs that started in the measured window (INCR counter). */
  runs: number;
  /** The same, from the recorded run list (cross-check). */
  listedRuns: number;
  /** Refreshes that started in the measured window, and the loader runs of each. */
  refreshes: number[];
}

/**
 * Groups the recorded loader runs of each key into refreshes: a run starting less than
 * REFRESH_WINDOW_MS after the first run of the current refresh belongs to it. Returns the
 * number of runs of each refresh whose first run started in [from, to).
 */
function refreshesOf(entries: string[], from: number, to: number): number[] {
  const byKey = new Map<string, number[]>();
  for (const e of entries) {
    const [key, t] = e.split('|');
    byKey.set(key!, [...(byKey.get(key!) ?? []), Number(t)]);
  }
  const out: number[] = [];
  for (const starts of byKey.values()) {
    starts.sort((a, b) => a - b);
    let first = Number.NEGATIVE_INFINITY;
    let runs = 0;
    const flush = () => {
      if (runs > 0 && first >= from && first < to) out.push(runs);
    };
    for (const t of starts) {
      if (t - first < REFRESH_WINDOW_MS) runs++;
      else {
        flush();
        first = t;
        runs = 1;
      }
    }
    flush();
  }
  return out;
}

async function runContender(
  redis: RedisServer,
  control: Redis,
  c: ContenderDef,
  timing: { warmupMs: number; measureMs: number },
  log: (msg: string) => void,
): Promise<Run> {
  await control.flushall();
  const tag = `${c.id}:${Date.now().toString(36)}`;
  const runsKey = `bench:cliff:runs:${tag}`;
  const counterKey = `bench:cliff:measured-runs:${tag}`;
  const fleet = await Fleet.start('bench/scenarios/expiry-cliff.ts', PROCESSES, { url: redis.url }, { label: 'expiry-cliff worker', readyTimeoutMs: 30_000 });
  try {
    const config = { ttlMs: TTL_MS, loaderMs: LOADER_MS, staleS: STALE_S, refreshThresholdMs: REFRESH_THRESHOLD_MS };
    // Process p is KEYS / PROCESSES keys ahead of process p - 1.
    fleet.members.forEach((w, i) =>
      w.send({ cmd: 'prepare', contender: c.id, prefix: `cliff:${tag}`, keys: KEYS, keyOffset: Math.round((i * KEYS) / PROCESSES), runsKey, counterKey, ...timing, config }),
    );
    const ready = await Promise.all(fleet.members.map((w) => w.take('prepared', 30_000)));
    const refused = ready.find((m) => m.unavailable !== undefined);
    if (refused) {
      log(`${c.id}: not available in this build (${String(refused.message)})`);
      return { unavailable: String(refused.unavailable), calls: 0, errors: 0, errorSamples: [], lat: [], lag: [], age: [], status: [], runs: 0, listedRuns: 0, refreshes: [] };
    }
    // The processes' schedules interleave: together they start a call every 1000 / (RATE × PROCESSES) ms,
    // and each key is called at even intervals fleet-wide. A call's latency counts from when it was
    // due (a stalled process does not hide its stall by calling less); the warm-up calls are not measured.
    const at = monotonicMs() + 500;
    const interval = 1000 / RATE;
    const warmupCalls = Math.round(timing.warmupMs / interval);
    const done = await Promise.all(
      fleet.members.map(
        (w, i) =>
          launch<{ status: string; age: number }>(
            [w],
            { mode: 'open', intervalMs: interval, durationMs: timing.warmupMs + timing.measureMs, offsetMs: (i * 1000) / (RATE * PROCESSES), settleMs: DRAIN_MS },
            { at, timeoutMs: timing.warmupMs + timing.measureMs + DRAIN_MS + 60_000 },
          )[0]!,
      ),
    );
    const measured = done.map((d) => d.records.filter((r) => r.index >= warmupCalls));
    const answered = measured.flat().filter((r) => r.ok);
    const failed = measured.flat().filter((r) => !r.ok);
    const round2 = (v: number) => Math.round(v * 100) / 100;
    const from = at + timing.warmupMs;
    const entries = await control.lrange(runsKey, 0, -1);
    const refreshes = refreshesOf(entries, from, from + timing.measureMs);
    const listedRuns = entries.filter((e) => {
      const t = Number(e.split('|')[1]);
      return t >= from && t < from + timing.measureMs;
    }).length;
    return {
      calls: answered.length + failed.length,
      errors: failed.length,
      errorSamples: failed.slice(0, 3).map((r) => `${r.name}: ${r.message}`),
      lat: answered.map((r) => round2(r.at + r.latency - r.due!)),
      lag: answered.map((r) => round2(r.at - r.due!)),
      age: answered.map((r) => r.age),
      status: answered.map((r) => r.status),
      runs: Number((await control.get(counterKey)) ?? 0),
      listedRuns,
      refreshes,
    };
  } finally {
    // Each worker is asked to exit; one that does not is killed.
    if (!(await fleet.close())) log(`${c.id}: a worker did not exit cleanly`);
  }
}

// --- statistics -----------------------------------------------------------------------------

interface Stats {
  runs: number;
  perNominalCycle: number;
  refreshes: number;
  /** Mean time between two refreshes of a key (ms). */
  interval: number;
  perRefresh: number;
  maxPerRefresh: number;
  multiRunRefreshes: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  blocked: number;
  slow: number;
  /** dogpile-guard: share of calls whose status says they waited for a loader run (miss, coalesced, pass). */
  waited: number | undefined;
  stale: number;
  staleAge50: number;
  staleAge99: number;
  /** Share of calls whose value was older than the TTL at the call's start (every contender). */
  pastTtl: number;
  lag99: number;
}

function stats(run: Run, c: ContenderDef, measureMs: number): Stats {
  const n = run.lat.length;
  const share = (k: number) => (n === 0 ? Number.NaN : k / n);
  const isStale = (i: number) => (c.kind === 'dogpile' ? run.status[i] === 'stale' : run.age[i]! > TTL_MS);
  const staleAges = run.age.filter((_, i) => isStale(i));
  return {
    runs: run.runs,
    perNominalCycle: run.runs / ((measureMs / TTL_MS) * KEYS),
    refreshes: run.refreshes.length,
    interval: run.refreshes.length === 0 ? Number.NaN : (measureMs * KEYS) / run.refreshes.length,
    perRefresh: run.refreshes.length === 0 ? Number.NaN : run.refreshes.reduce((a, b) => a + b, 0) / run.refreshes.length,
    maxPerRefresh: run.refreshes.length === 0 ? Number.NaN : Math.max(...run.refreshes),
    multiRunRefreshes: run.refreshes.filter((r) => r > 1).length,
    p50: percentile(run.lat, 50),
    p99: percentile(run.lat, 99),
    p999: percentile(run.lat, 99.9),
    max: n === 0 ? Number.NaN : Math.max(...run.lat),
    blocked: share(run.lat.filter((l) => l > BLOCKED_MS).length),
    slow: share(run.lat.filter((l) => l > SLOW_MS).length),
    waited: c.kind === 'dogpile' ? share(run.status.filter((s) => s === 'miss' || s === 'coalesced' || s === 'pass').length) : undefined,
    stale: share(staleAges.length),
    staleAge50: percentile(staleAges, 50),
    staleAge99: percentile(staleAges, 99),
    pastTtl: share(run.age.filter((a) => a > TTL_MS).length),
    lag99: percentile(run.lag, 99),
  };
}

const pct = (v: number | undefined, digits = 1) => (v === undefined || Number.isNaN(v) ? '—' : `${(v * 100).toFixed(digits)}%`);
const f1 = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(1));
const f2 = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(2));

// --- main -----------------------------------------------------------------------------------

export default async function expiryCliffBench(ctx: BenchContext): Promise<string> {
  const timing = ctx.quick ? { warmupMs: 2000, measureMs: 4000 } : { warmupMs: 3000, measureMs: 15_000 };
  const only = (process.env.CLIFF_BENCH_ONLY ?? '').split(',').filter(Boolean);
  const loadStart = os.loadavg()[0]!;
  const started = performance.now();
  const redis: RedisServer = await startRedis();
  let control: Redis | undefined;
  const results = new Map<string, { run: Run; stats: Stats }>();
  try {
    control = redis.client();
    for (const c of CONTENDERS) {
      if (only.length > 0 && !only.includes(c.id)) continue;
      const run = await runContender(redis, control, c, timing, ctx.log);
      if (run.unavailable) {
        results.set(c.id, { run, stats: stats(run, c, timing.measureMs) });
        continue;
      }
      const s = stats(run, c, timing.measureMs);
      results.set(c.id, { run, stats: s });
      ctx.log(
        `${c.id}: ${run.calls} calls, ${s.runs} loader runs (${f2(s.perNominalCycle)} per nominal cycle, ${f2(s.perRefresh)} per refresh, max ${s.maxPerRefresh}, every ${s.interval.toFixed(0)} ms), ` +
          `p50 ${f1(s.p50)} p99 ${f1(s.p99)} p99.9 ${f1(s.p999)} max ${f1(s.max)} ms, blocked ${pct(s.blocked)}, > ${SLOW_MS} ms ${pct(s.slow)}` +
          `${s.waited === undefined ? '' : `, waited (status) ${pct(s.waited)}`}, stale ${pct(s.stale)} (age p50 ${f1(s.staleAge50)} p99 ${f1(s.staleAge99)} ms), ` +
          `past TTL ${pct(s.pastTtl)}, start lag p99 ${f1(s.lag99)} ms${run.runs !== run.listedRuns ? `, INCR ${run.runs} ≠ list ${run.listedRuns}` : ''}` +
          `${run.errors ? `, ${run.errors} errors: ${run.errorSamples[0]}` : ''}`,
      );
    }
  } finally {
    control?.disconnect();
    await redis.stop();
  }
  if (process.env.CLIFF_BENCH_DUMP) writeFileSync(process.env.CLIFF_BENCH_DUMP, JSON.stringify(Object.fromEntries([...results].map(([id, r]) => [id, r.run]))));
  return report({ ctx, timing, results, load: [loadStart, os.loadavg()[0]!], seconds: (performance.now() - started) / 1000 });
}

function report(input: {
  ctx: BenchContext;
  timing: { warmupMs: number; measureMs: number };
  results: Map<string, { run: Run; stats: Stats }>;
  load: [number, number];
  seconds: number;
}): string {
  const { timing, results } = input;
  const measureS = timing.measureMs / 1000;
  const nominal = (timing.measureMs / TTL_MS) * KEYS;
  const out: string[] = [];
  out.push('## The expiry cliff: hot keys expiring under open-loop load (`bench/expiry-cliff.bench.ts`)');
  out.push('');
  out.push(
    `${PROCESSES} processes × ${RATE} calls/s, open loop, over ${KEYS} hot keys; TTL ${TTL_MS / 1000} s, loader ${LOADER_MS} ms (a timer); ` +
      `${measureS} s measured after a ${timing.warmupMs / 1000} s warm-up${input.ctx.quick ? ' — a quick run (BENCH_QUICK=1)' : ''}. ` +
      `Every contender in one run against one throwaway Redis (flushed between contenders), each in ${PROCESSES} fresh processes, one after the other; ` +
      `one measurement per contender (the whole run took ${input.seconds.toFixed(0)} s). The machine was shared with other work: 1-minute load average ` +
      `${input.load[0].toFixed(1)} at the start and ${input.load[1].toFixed(1)} at the end on ${os.cpus().length} CPUs.`,
  );
  out.push('');
  out.push('**Setup and definitions.**');
  out.push('');
  out.push(
    `- *Open loop*: process *p* starts call *i* at \`start + p × ${(1000 / (RATE * PROCESSES)).toFixed(2)} ms + i × ${(1000 / RATE).toFixed(0)} ms\` ` +
      `on key (*i* + ${KEYS / PROCESSES}*p*) mod ${KEYS} — so each key is called every ${1000 / ((RATE * PROCESSES) / KEYS)} ms fleet-wide, by the processes in turn — whether or not its earlier calls have settled; when the process's timer wakes late, every call already due starts at once. ` +
      'A call\'s *latency* runs from its scheduled start to the moment its promise settles, so a stalled process cannot hide the stall by calling less ' +
      '(no coordinated omission); it includes the harness\'s own start delay (*start lag p99* below). The warm-up fills the keys (the first fill is not measured); ' +
      'only calls scheduled in the measured window count.\n' +
      '- The loader waits 100 ms and returns `{ at: Date.now() }`. Each run is recorded in Redis on a separate connection (an `RPUSH` of key and start time, ' +
      'and an `INCR` of a counter for runs starting in the measured window). *Runs per nominal cycle* = runs ÷ ' +
      `(${measureS} s ÷ TTL × ${KEYS} keys = ${nominal}). A *refresh* is a group of runs of one key starting within ${REFRESH_WINDOW_MS} ms of its first run ` +
      '(runs of different refreshes of a key are at least a TTL apart); *runs per refresh* = runs ÷ refreshes started in the window, with the largest group.\n' +
      `- *Blocked by a loader*: latency above ${BLOCKED_MS} ms (half the loader's duration). A hit costs well under a millisecond, so a call that slow ` +
      "waited for a loader run, or for a CPU (the machine's other work can stall a process too). A call arriving in the second half of a loader run " +
      `waits less than ${BLOCKED_MS} ms, so this counts about half of the calls a loader delays; the *> ${SLOW_MS} ms* column counts nearly all of them, ` +
      "and more CPU stalls. For dogpile-guard, *waited (status)* is the share whose `resolve()` status says it waited for a loader run " +
      "(`miss`, `coalesced` or `pass`), whatever the latency: it tells a loader from a stall.\n" +
      "- *Stale*: dogpile-guard — `resolve()` answered with status `stale`; peers — the value's `at` is more than the TTL before the call's start " +
      `(the libraries' TTLs start when the value is stored, a millisecond or so after \`at\`). Age is taken at the call's start. *Past TTL* applies the ` +
      "peers' rule to every contender.\n" +
      `- dogpile-guard: \`createCache({ redis, …options })\`, \`cache.resolve(key, loader, ${TTL_MS})\`. bentocache: \`new BentoCache({ grace: '${STALE_S}s', timeout: 0, ` +
      'stores: bentostore().useL1Layer(memoryDriver()).useL2Layer(redisDriver({ connection })) })`, `getOrSet({ key, factory, ttl })` (no bus). ' +
      `async-cache-dedupe: \`createCache({ ttl: 1, stale: ${STALE_S}, storage: { type: 'redis', options: { client } } }).define(…)\`. cache-manager 7: ` +
      `\`createCache({ stores: [new Keyv({ store: new KeyvRedis(url) })] })\`, \`wrap(key, fn, ${TTL_MS}, ${REFRESH_THRESHOLD_MS})\` ` +
      `(refresh in the background when less than ${REFRESH_THRESHOLD_MS} ms of the TTL is left: its README's 3-of-10 ratio, and more than the loader's ${LOADER_MS} ms).`,
  );
  out.push('');
  out.push(
    '| contender | loader runs | per nominal cycle | per refresh (max) | refresh interval (ms) | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | blocked > ' +
      `${BLOCKED_MS} ms | > ${SLOW_MS} ms | waited (status) | stale | stale age p50 / p99 (ms) | past TTL | start lag p99 (ms) | calls | errors |`,
  );
  out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of CONTENDERS) {
    const r = results.get(c.id);
    if (!r) continue;
    if (r.run.unavailable) {
      out.push(`| ${c.name} | not available in this build (\`${r.run.unavailable}\` rejected by \`createCache\`) |${' — |'.repeat(16)}`);
      continue;
    }
    const s = r.stats;
    out.push(
      `| ${c.name} | ${s.runs} | ${f2(s.perNominalCycle)} | ${f2(s.perRefresh)} (${s.maxPerRefresh}) | ${s.interval.toFixed(0)} | ${f1(s.p50)} | ${f1(s.p99)} | ${f1(s.p999)} | ${f1(s.max)} | ` +
        `${pct(s.blocked, 2)} | ${pct(s.slow, 2)} | ${pct(s.waited, 2)} | ${pct(s.stale, 2)} | ${s.stale > 0 ? `${f1(s.staleAge50)} / ${f1(s.staleAge99)}` : '—'} | ${pct(s.pastTtl, 2)} | ` +
        `${f1(s.lag99)} | ${r.run.calls} | ${r.run.errors} |`,
    );
  }

  // Targets.
  const verdict = (ok: boolean) => (ok ? '**met**' : '**missed**');
  const peers = CONTENDERS.filter((c) => c.kind === 'peer' && results.get(c.id) && !results.get(c.id)!.run.unavailable);
  const bestPeer = peers.reduce<{ id: string; p999: number } | undefined>((best, c) => {
    const p = results.get(c.id)!.stats.p999;
    return best === undefined || p < best.p999 ? { id: c.id, p999: p } : best;
  }, undefined);
  out.push('');
  out.push('### Against the targets of issue 11');
  out.push('');
  for (const c of CONTENDERS.filter((x) => x.kind === 'dogpile')) {
    const r = results.get(c.id);
    if (!r) continue;
    if (r.run.unavailable) {
      out.push(`- ${c.name}: not available in this build — \`createCache\` rejects \`${r.run.unavailable}\`.`);
      continue;
    }
    const s = r.stats;
    const parts = [
      `one loader run per refresh fleet-wide ${verdict(s.maxPerRefresh === 1)} (${f2(s.perRefresh)} per refresh, ${s.multiRunRefreshes} of ${s.refreshes} refreshes with more than one run)`,
      // Judged by resolve()'s status, which names every call that waited for a loader run; the latency share is shown with it.
      `no call blocked by a loader after the first fill ${verdict(s.waited === 0)} (${pct(s.waited, 2)} of the calls waited for a loader run by their status; ` +
        `${pct(s.blocked, 2)} took more than ${BLOCKED_MS} ms${s.waited === 0 && s.blocked > 0 ? ', all of them with a status that did not wait: CPU stalls' : ''})`,
      bestPeer
        ? `p99.9 no worse than the best peer's ${verdict(s.p999 <= bestPeer.p999)} (${f1(s.p999)} ms against ${bestPeer.id} ${f1(bestPeer.p999)} ms)`
        : 'p99.9 against the peers: no peer ran',
    ];
    if (c.id.startsWith('dogpile-early')) parts.push(`at most ${pct(EARLY_STALE_MAX, 0)} stale ${verdict(s.stale <= EARLY_STALE_MAX)} (${pct(s.stale, 2)})`);
    out.push(`- ${c.name}${c.stale ? '' : ' (today\'s behaviour, for reference)'}: ${parts.join('; ')}.`);
  }
  const peerRows = peers.map((c) => {
    const s = results.get(c.id)!.stats;
    return `${c.id} ${f2(s.perRefresh)} runs per refresh (max ${s.maxPerRefresh}), ${pct(s.blocked, 2)} blocked, ${pct(s.stale, 2)} stale`;
  });
  if (peerRows.length) out.push(`- Peers, for comparison: ${peerRows.join('; ')}.`);
  out.push('');
  out.push(
    `Reading the table: a peer that refreshes in each process runs the loader up to ${PROCESSES} times per refresh (once per process that sees the ` +
      'expiry before another process has stored the new value). cache-manager refreshes ahead of expiry, when less than ' +
      `${REFRESH_THRESHOLD_MS} ms of the TTL is left, so its values never pass their TTL (no stale answers) but its refreshes come more often ` +
      'than the TTL (the *refresh interval* column: the measured window × keys ÷ refreshes). The other stale-serving contenders refresh on the ' +
      "first call after the TTL and serve the old value until the loader's result is stored.",
  );
  return out.join('\n');
}
