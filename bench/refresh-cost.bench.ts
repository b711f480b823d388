/**
 * Round trips per refresh of a hot key: how many Redis commands each expiry of a key that 4
 * processes read all the time costs, fleet-wide, and whether the key's channel is subscribed
 * and unsubscribed again at every refresh.
 *
 * One throwaway Redis; per configuration, 4 fresh processes (`bench/refresh-cost-worker.ts`),
 * each with a cache on its own ioredis client and 20 lanes calling `getOrCompute(key, loader,
 * ttl)` in a loop (1 ms pause between calls); the loader counts its runs with `INCR` on its
 * own connection and waits 50 ms. After a warm-up, a window of whole refresh cycles is
 * measured: it starts and ends in the middle of a cycle (a listener on the key's channel hears
 * each commit; the boundary is 30 % of the TTL after one), with every lane paused for the
 * moment of the snapshot, so nothing is in flight when `INFO commandstats` is read and the
 * workers' tallies are taken.
 *
 *   npm run bench -- refresh-cost        (writes bench/.out/refresh-cost.md)
 */
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { JsonChild, type Message, root } from '../tools/child-process.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { cacheKeys } from '../src/store/key.js';
import { commandCounts } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const PROCESSES = 4;
const LANES = 20;
const PAUSE_MS = 1;
/** Where in a cycle a window starts and ends: this fraction of the TTL after a commit was heard. */
const BOUNDARY_AT = 0.3;

interface Config {
  id: string;
  title: string;
  /** `createCache` options besides `redis`. */
  options: Record<string, unknown>;
  ttl: number;
}

const CONFIGS: Config[] = [
  { id: 'defaults', title: '(a) `createCache({ redis })`, TTL 1 s', options: {}, ttl: 1000 },
  { id: 'swr', title: "(b) `createCache({ redis, staleWhileRevalidate: '10s' })`, TTL 1 s", options: { staleWhileRevalidate: '10s' }, ttl: 1000 },
  { id: 'short', title: '(c) `createCache({ redis })`, TTL 200 ms', options: {}, ttl: 200 },
];

/** A worker's totals at a boundary (see `paused` in the worker). */
interface Tally {
  calls: number;
  errors: number;
  firstError: string | undefined;
  loaderRuns: number;
  emptyGets: number;
  sent: Record<string, number>;
}

interface Measurement {
  config: Config;
  /** Window length (ms). */
  ms: number;
  /** Lane calls answered in the window, all processes. */
  calls: number;
  errors: number;
  firstError: string | undefined;
  /** Loader runs in the window (the counter's INCRs), all processes. */
  loads: number;
  /** Loader runs per process. */
  loadsBy: number[];
  /** Commits heard on the key's channel in the window, and the refresh cycles they form. */
  messages: number;
  cycles: number;
  /** Commands written by the 4 caches' connections, by name (`evalsha lookup`, `get`, ...). */
  sent: Record<string, number>;
  /** Plain GETs answered with nothing. */
  emptyGets: number;
  /** Commands Redis ran (INFO commandstats), the inspector's own INFO and the counter's INCRs taken out. */
  server: Record<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function add(into: Record<string, number>, from: Record<string, number>, sign = 1): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + sign * v;
}

/** Sum of the tallies at the end minus those at the start. */
function delta(start: Tally[], end: Tally[]) {
  const sent: Record<string, number> = {};
  end.forEach((t, i) => {
    add(sent, t.sent);
    add(sent, start[i]!.sent, -1);
  });
  for (const k of Object.keys(sent)) if (sent[k] === 0) delete sent[k];
  return {
    sent,
    calls: end.reduce((a, t, i) => a + t.calls - start[i]!.calls, 0),
    errors: end.reduce((a, t, i) => a + t.errors - start[i]!.errors, 0),
    firstError: end.find((t) => t.firstError !== undefined)?.firstError,
    emptyGets: end.reduce((a, t, i) => a + t.emptyGets - start[i]!.emptyGets, 0),
    loadsBy: end.map((t, i) => t.loaderRuns - start[i]!.loaderRuns),
  };
}

/** Commits closer than half a TTL to the previous one belong to the same refresh cycle. */
function countCycles(times: number[], ttl: number): number {
  let cycles = 0;
  for (let i = 0; i < times.length; i++) if (i === 0 || times[i]! - times[i - 1]! > ttl / 2) cycles++;
  return cycles;
}

async function measure(redis: RedisServer, config: Config, plan: { warmupMs: number; windowMs: number }, log: (msg: string) => void): Promise<Measurement> {
  const key = `bench:refresh:${config.id}`;
  const counterKey = `bench:refresh:loads:${config.id}`;
  const settings = { key, counterKey, ttl: config.ttl, lanes: LANES, pauseMs: PAUSE_MS, options: config.options };
  const workers = Array.from(
    { length: PROCESSES },
    (_, i) => new JsonChild(`refresh-cost worker ${i}`, ['--import', 'tsx', path.join(root, 'bench', 'refresh-cost-worker.ts'), redis.url, JSON.stringify(settings)]),
  );
  let inspector: Redis | undefined;
  let listener: Redis | undefined;
  try {
    await Promise.all(workers.map((w) => w.take('up', 60_000)));
    inspector = redis.client();
    listener = redis.client();
    // Every commit publishes on the key's channel (the value inline, or that it was stored).
    const heard: number[] = [];
    listener.on('message', () => heard.push(performance.now()));
    await listener.subscribe(cacheKeys('dogpile', key).channel);

    /** Waits for the next commit, then for BOUNDARY_AT of the TTL; pauses every lane. */
    const boundary = async (): Promise<Tally[]> => {
      const seen = heard.length;
      const deadline = performance.now() + 10 * config.ttl + 5000;
      while (heard.length === seen) {
        if (performance.now() > deadline) throw new Error(`${config.id}: no commit heard on the key's channel`);
        await sleep(1);
      }
      await sleep(BOUNDARY_AT * config.ttl);
      for (const w of workers) w.send({ cmd: 'pause' });
      return (await Promise.all(workers.map((w) => w.take('paused', 20_000)))).map((m: Message) => m.tally as Tally);
    };

    for (const w of workers) w.send({ cmd: 'start' });
    await Promise.all(workers.map((w) => w.take('started', 10_000)));
    await sleep(plan.warmupMs);

    const startTallies = await boundary();
    const loadsBefore = Number(await inspector.get(counterKey));
    const before = commandCounts(String(await inspector.info('commandstats')));
    const heardBefore = heard.length;
    const t0 = performance.now();
    for (const w of workers) w.send({ cmd: 'resume' });
    await sleep(plan.windowMs);
    const endTallies = await boundary();
    const t1 = performance.now();
    const after = commandCounts(String(await inspector.info('commandstats')));
    const loadsAfter = Number(await inspector.get(counterKey));
    const window = heard.slice(heardBefore);

    const d = delta(startTallies, endTallies);
    const loads = loadsAfter - loadsBefore;
    const server: Record<string, number> = {};
    for (const [name, calls] of Object.entries(after)) {
      let n = calls - (before[name] ?? 0);
      if (name === 'info') n -= 1; // the first INFO commandstats
      if (name === 'incr') n -= loads; // the loaders' counter
      if (n !== 0) server[name] = n;
    }
    const m: Measurement = {
      config,
      ms: t1 - t0,
      calls: d.calls,
      errors: d.errors,
      firstError: d.firstError,
      loads,
      loadsBy: d.loadsBy,
      messages: window.length,
      cycles: countCycles(window, config.ttl),
      sent: d.sent,
      emptyGets: d.emptyGets,
      server,
    };
    log(
      `${config.id}: ${(m.ms / 1000).toFixed(1)} s, ${m.calls} calls, ${m.loads} loader runs (${m.loadsBy.join('/')}), ${m.cycles} cycles, ` +
        `sent ${Object.entries(m.sent)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
    );
    return m;
  } finally {
    listener?.disconnect();
    inspector?.disconnect();
    const clean = await Promise.all(workers.map((w) => w.exit()));
    await Promise.all(workers.map((w) => w.dispose()));
    if (clean.includes(false)) log(`${clean.filter((ok) => !ok).length} refresh-cost worker(s) did not exit cleanly`);
  }
}

// --- the section ------------------------------------------------------------------------------

/** What each command of a refresh is, for the table. */
const WHAT: Record<string, string> = {
  'evalsha lookup': 'lookup-or-lead script',
  'evalsha commit': 'commit script (store, release, announce)',
  'evalsha extend': 'lock renewal script',
  'eval lookup': 'lookup-or-lead script, sent whole (NOSCRIPT)',
  'eval commit': 'commit script, sent whole (NOSCRIPT)',
  get: 'plain `GET` of the value',
  subscribe: "the key's channel",
  unsubscribe: "the key's channel",
  ssubscribe: "the key's channel (sharded)",
  sunsubscribe: "the key's channel (sharded)",
  psubscribe: '',
  publish: 'announcement of the commit',
  spublish: 'announcement of the commit (sharded)',
};

const PUBSUB = ['subscribe', 'unsubscribe', 'ssubscribe', 'sunsubscribe', 'psubscribe', 'punsubscribe'];

const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '—');

function table(m: Measurement): string[] {
  const refreshes = m.loads;
  const per = (n: number) => f2(n / refreshes);
  const hits = (m.sent.get ?? 0) - m.emptyGets;
  // Commands sent by the caches, by bare name (EVALSHA of every script together), against what Redis ran.
  const bare: Record<string, number> = {};
  for (const [name, n] of Object.entries(m.sent)) bare[name.split(' ')[0]!] = (bare[name.split(' ')[0]!] ?? 0) + n;
  const names = new Set([...Object.keys(m.sent).filter((n) => n !== 'get'), ...PUBSUB, ...Object.keys(m.server).filter((n) => n !== 'get' && !(n in bare))]);
  const order = (n: string) => (n.startsWith('eval') ? 0 : PUBSUB.includes(n) ? 2 : 1);
  const rows = [...names].sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  const out: string[] = [];
  out.push('| command | what it is | sent by the 4 caches | per refresh | run by Redis (`INFO commandstats`) | of these inside scripts |');
  out.push('|---|---|---:|---:|---:|---:|');
  const serverCell = (name: string) => {
    const bareName = name.split(' ')[0]!;
    if (name.includes(' ')) return '';
    const ran = m.server[bareName] ?? 0;
    return String(ran);
  };
  const insideCell = (name: string) => {
    if (name.includes(' ')) return '';
    return String((m.server[name] ?? 0) - (bare[name] ?? 0));
  };
  let beyond = 0;
  for (const name of rows) {
    const n = m.sent[name] ?? 0;
    beyond += n;
    const label = name.includes(' ') ? `\`${name.split(' ')[0]!.toUpperCase()}\` ${name.split(' ')[1]}` : `\`${name.toUpperCase()}\``;
    out.push(`| ${label} | ${WHAT[name] ?? ''} | ${n} | ${per(n)} | ${serverCell(name)} | ${insideCell(name)} |`);
  }
  // EVALSHA of all scripts together, as Redis counts it.
  for (const bareName of ['evalsha', 'eval']) {
    if (bare[bareName] === undefined && m.server[bareName] === undefined) continue;
    out.push(`| \`${bareName.toUpperCase()}\`, all scripts | | ${bare[bareName] ?? 0} | ${per(bare[bareName] ?? 0)} | ${m.server[bareName] ?? 0} | ${(m.server[bareName] ?? 0) - (bare[bareName] ?? 0)} |`);
  }
  beyond += m.emptyGets;
  out.push(`| \`GET\`, found nothing | the value had expired | ${m.emptyGets} | ${per(m.emptyGets)} | | |`);
  out.push(`| **round trips beyond the hits** | | **${beyond}** | **${per(beyond)}** | | |`);
  out.push(`| \`GET\`, found the value (hits) | | ${hits} | ${per(hits)} | | |`);
  out.push(`| \`GET\`, all | | ${m.sent.get ?? 0} | ${per(m.sent.get ?? 0)} | ${m.server.get ?? 0} | ${(m.server.get ?? 0) - (m.sent.get ?? 0)} |`);
  return out;
}

function section(ctx: BenchContext, results: Measurement[], seconds: number, load: [number, number]): string {
  const out: string[] = [];
  out.push('## Round trips per refresh of a hot key (bench/refresh-cost.bench.ts)');
  out.push('');
  out.push('Command: `npm run bench -- refresh-cost`');
  out.push('');
  out.push(
    `One throwaway Redis; the whole section took ${seconds.toFixed(0)} s${ctx.quick ? ' — a quick run (BENCH_QUICK=1)' : ''}. ` +
      `The machine was shared with other work: 1-minute load average ${load[0].toFixed(1)} at the start and ${load[1].toFixed(1)} at the end on ${os.cpus().length} CPUs.`,
  );
  out.push('');
  out.push(
    `**Method.** Per configuration, ${PROCESSES} fresh processes, each with the cache on its own ioredis client and ${LANES} lanes that call ` +
      `\`getOrCompute(key, loader, ttl)\` on one hot key in a loop (each call awaited, ${PAUSE_MS} ms pause between calls). The loader counts its runs ` +
      "with `INCR` on a separate connection, then waits 50 ms. After a warm-up, a window of whole refresh cycles is measured: a listener on the key's channel " +
      `hears every commit, and the window starts and ends ${BOUNDARY_AT * 100} % of a TTL after one (mid-cycle), with every lane paused for the moment of the snapshot, so that no call, ` +
      'loader or refresh is in flight when the counts are read. *Refreshes* are the loader runs in the window; *cycles* are the groups of commits heard (commits less than half a TTL apart count as one). ' +
      "Two counts per command: *sent by the 4 caches*, tallied in each process on the cache's connections (its client and the subscriber connection the library opens from it; every " +
      'command written to the socket, `EVALSHA` by script, `GET` by whether it found a value); and *run by Redis*, the `INFO commandstats` difference on an inspector connection, ' +
      "less the inspector's own `INFO` and the loaders' counting `INCR`s. Redis counts the commands that scripts run too: the difference is listed as *inside scripts*. " +
      '*Round trips beyond the hits* is every command the caches sent except the `GET`s that found the value.',
  );
  out.push('');
  out.push(
    "What the commands are (`src/store/cache-scripts.ts`, `src/store/redis-backend.ts`, `src/core/miss-protocol.ts`): a process that believes the value fresh reads it with a plain `GET`; once that finds nothing (or the process's own record of the expiry has passed), " +
      'it runs the *lookup-or-lead* script (`GET` the value; if missing or past its `ttl`, `SET NX PX` the lead lock; else `PTTL` of the lock): one process gets the lead, the others are told to wait. ' +
      "A waiter subscribes to the key's channel and runs the lookup once more (so that a commit made before its subscription is not missed), then sleeps until the announcement. " +
      'The leader runs the loader and then the *commit* script (`GET` the lock to check the token, `DEL` it, `SET` the value, `PUBLISH` it inline on the channel). ' +
      'Within a process, concurrent callers share one flight and one `GET`. The subscriber connection keeps a channel subscribed for a linger after its last waiter left; a channel that comes back within its linger lingers twice as long the next time (up to 60 s, `src/redis/subscriber.ts`).',
  );
  for (const m of results) {
    const cfg = m.config;
    const refreshes = m.loads;
    const pubsub = PUBSUB.map((n) => [n, m.sent[n] ?? 0] as const).filter(([, n]) => n > 0);
    out.push('');
    out.push(`### ${cfg.title}`);
    out.push('');
    out.push(
      `Window ${(m.ms / 1000).toFixed(1)} s: ${m.calls} calls answered (${((m.calls / m.ms) * 1000).toFixed(0)}/s), ${m.errors} error(s)${m.firstError ? ` (first: ${m.firstError})` : ''}; ` +
        `${refreshes} refreshes (loader runs; by process ${m.loadsBy.join(', ')}) in ${m.cycles} cycles: **${f2(refreshes / m.cycles)} loader run(s) per cycle** fleet-wide, ` +
        `${m.messages} commit(s) heard. \`GET\`s per call: ${f2((m.sent.get ?? 0) / m.calls)}.`,
    );
    out.push('');
    out.push(...table(m));
    out.push('');
    out.push(
      pubsub.length === 0
        ? `SUBSCRIBE/UNSUBSCRIBE in the window: **none** (0 per refresh).`
        : `SUBSCRIBE/UNSUBSCRIBE in the window: **${pubsub.map(([n, c]) => `${c} ${n.toUpperCase()}`).join(', ')}** (${f2(pubsub.reduce((a, [, c]) => a + c, 0) / refreshes)} per refresh).`,
    );
  }
  return out.join('\n');
}

export default async function run(ctx: BenchContext): Promise<string> {
  const started = performance.now();
  const load0 = os.loadavg()[0]!;
  const plan = ctx.quick ? { warmupMs: 2000, windowMs: 4000 } : { warmupMs: 4000, windowMs: 12_000 };
  const redis = await startRedis();
  const results: Measurement[] = [];
  try {
    for (const config of CONFIGS) results.push(await measure(redis, config, plan, ctx.log));
  } finally {
    await redis.stop();
  }
  return section(ctx, results, (performance.now() - started) / 1000, [load0, os.loadavg()[0]!]);
}
