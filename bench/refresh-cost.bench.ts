/**
 * Round trips per refresh of a hot key: how many Redis commands each expiry of a key that 4
 * processes read all the time costs, fleet-wide, and whether the key's channel is subscribed
 * and unsubscribed again at every refresh.
 *
 * One throwaway Redis; per configuration, 4 fresh processes (a fleet of `bench/scenarios/refresh-cost.ts`),
 * each with a cache on its own ioredis client and 20 lanes calling `getOrCompute(key, loader,
 * ttl)` in a loop (1 ms pause between calls); the loader counts its runs with `INCR` (and the server's `TIME`) on its
 * own connection and waits 50 ms. After a warm-up, a window of whole refresh cycles is
 * measured: it starts and ends in the middle of a cycle (a listener on the key's channel hears
 * each commit; the boundary is 30 % of the TTL after one), with every lane paused for the
 * moment of the snapshot, so nothing is in flight when `INFO commandstats` is read and the
 * workers' tallies are taken.
 *
 *   npm run bench -- refresh-cost        (writes bench/.out/refresh-cost.md)
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { Fleet } from '../tools/fleet/fleet.js';
import type { RunReport } from '../tools/fleet/plan.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { cacheKeys } from '../src/store/key.js';
import { CHANNEL_LINGER_MS } from '../src/redis/subscriber.js';
import { commandCounts, summary } from './lib/stats.js';
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

/** A process's totals at a boundary (`tally` in bench/scenarios/refresh-cost.ts). */
interface Tally {
  calls: number;
  errors: number;
  firstError: string | undefined;
  loaderRuns: number;
  runStarts: number[];
  emptyGets: number;
  sent: Record<string, number>;
  lookups: Record<string, number>;
  pubsub: { name: string; at: number }[];
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
  /** Commits heard on the key's channel in the window. */
  messages: number;
  /** Refresh cycles: the groups the loader runs form on the Redis server's clock. */
  cycles: number;
  /** Commands written by the 4 caches' connections, by name (`evalsha lookup`, `get`, ...). */
  sent: Record<string, number>;
  /** Plain GETs answered with nothing. */
  emptyGets: number;
  /** Lookup-or-lead scripts by answer. */
  lookups: Record<string, number>;
  /** Per process, its (un)subscribes in the window: the command and when (ms after the window started). */
  pubsubBy: { name: string; at: number }[][];
  /** Commands Redis ran (INFO commandstats), the inspector's own INFO and the loaders' counting scripts taken out. */
  server: Record<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function add(into: Record<string, number>, from: Record<string, number>, sign = 1): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + sign * v;
}

/** The sum over the processes of what each did between its two tallies. */
function delta(start: Tally[], end: Tally[], t0: number) {
  const sent: Record<string, number> = {};
  const lookups: Record<string, number> = {};
  end.forEach((t, i) => {
    add(sent, t.sent);
    add(sent, start[i]!.sent, -1);
    add(lookups, t.lookups);
    add(lookups, start[i]!.lookups, -1);
  });
  for (const r of [sent, lookups]) for (const k of Object.keys(r)) if (r[k] === 0) delete r[k];
  return {
    sent,
    lookups,
    calls: end.reduce((a, t, i) => a + t.calls - start[i]!.calls, 0),
    errors: end.reduce((a, t, i) => a + t.errors - start[i]!.errors, 0),
    firstError: end.find((t) => t.firstError !== undefined)?.firstError,
    emptyGets: end.reduce((a, t, i) => a + t.emptyGets - start[i]!.emptyGets, 0),
    loadsBy: end.map((t, i) => t.loaderRuns - start[i]!.loaderRuns),
    runStarts: end.flatMap((t, i) => t.runStarts.slice(start[i]!.runStarts.length)).sort((a, b) => a - b),
    pubsubBy: end.map((t, i) => t.pubsub.slice(start[i]!.pubsub.length).map((e) => ({ name: e.name, at: e.at - t0 }))),
  };
}

/**
 * Loader runs that start less than half a TTL after the previous one belong to the same refresh
 * cycle (the next cycle's run starts at least a TTL after the previous commit).
 */
function countCycles(times: number[], ttl: number): number {
  let cycles = 0;
  for (let i = 0; i < times.length; i++) if (i === 0 || times[i]! - times[i - 1]! > ttl / 2) cycles++;
  return cycles;
}

async function measure(redis: RedisServer, config: Config, plan: { warmupMs: number; windowMs: number }, log: (msg: string) => void): Promise<Measurement> {
  const key = `bench:refresh:${config.id}`;
  const counterKey = `bench:refresh:loads:${config.id}`;
  const settings = { key, counterKey, ttl: config.ttl, options: config.options };
  const fleet = await Fleet.start('bench/scenarios/refresh-cost.ts', PROCESSES, { url: redis.url, settings }, { label: 'refresh-cost worker' });
  let inspector: Redis | undefined;
  let listener: Redis | undefined;
  /** Every lane calls in a loop until the next boundary (at once: no lead). */
  let running: Promise<RunReport>[] = [];
  const run = (timeoutMs: number) => (running = fleet.launch({ mode: 'lanes', lanes: LANES, pauseMs: PAUSE_MS, records: false }, { leadMs: 0, timeoutMs }));
  try {
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
      fleet.stop();
      return (await Promise.all(running)).map((r) => r.tally as Tally);
    };

    run(plan.warmupMs + 10 * config.ttl + 30_000);
    await sleep(plan.warmupMs);

    const startTallies = await boundary();
    const loadsBefore = Number(await inspector.get(counterKey));
    const before = commandCounts(String(await inspector.info('commandstats')));
    const heardBefore = heard.length;
    const t0 = performance.now();
    const epoch0 = Date.now();
    run(plan.windowMs + 10 * config.ttl + 30_000);
    await sleep(plan.windowMs);
    const endTallies = await boundary();
    const t1 = performance.now();
    const after = commandCounts(String(await inspector.info('commandstats')));
    const loadsAfter = Number(await inspector.get(counterKey));
    const window = heard.slice(heardBefore);

    const d = delta(startTallies, endTallies, epoch0);
    const loads = loadsAfter - loadsBefore;
    const server: Record<string, number> = {};
    for (const [name, calls] of Object.entries(after)) {
      let n = calls - (before[name] ?? 0);
      if (name === 'info') n -= 1; // the first INFO commandstats
      if (name === 'incr' || name === 'eval' || name === 'time') n -= loads; // the loaders' counting script
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
      cycles: countCycles(d.runStarts, config.ttl),
      sent: d.sent,
      emptyGets: d.emptyGets,
      lookups: d.lookups,
      pubsubBy: d.pubsubBy,
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
    if (!(await fleet.close())) log('a refresh-cost worker did not exit cleanly');
  }
}

// --- the section ------------------------------------------------------------------------------

const PUBSUB = ['subscribe', 'unsubscribe', 'ssubscribe', 'sunsubscribe', 'psubscribe', 'punsubscribe'];
/** Commands the library's cache scripts run inside Redis (never sent on their own here). */
const IN_SCRIPTS = ['set', 'pttl', 'pexpire', 'del', 'publish', 'spublish'];
const LOOKUP_ANSWERS: [string, string][] = [
  ['value', 'found the value'],
  ['lead', 'lead taken'],
  ['wait', 'wait'],
  ['stale+lead', 'stale value, lead taken'],
  ['stale', 'stale value, another leads'],
  ['other', 'other'],
];

/** What a command sent by the caches is, for the table. */
function what(name: string, m: Measurement): string {
  switch (name) {
    case 'evalsha lookup':
    case 'eval lookup': {
      const answers = LOOKUP_ANSWERS.filter(([k]) => (m.lookups[k] ?? 0) > 0).map(([k, label]) => `${label} ${m.lookups[k]}`);
      return `lookup-or-lead script${answers.length > 0 ? ` (answered: ${answers.join('; ')})` : ''}`;
    }
    case 'evalsha commit':
    case 'eval commit':
      return 'commit script: store, release, announce';
    case 'evalsha extend':
      return 'lock renewal script';
    case 'subscribe':
    case 'unsubscribe':
      return "the key's channel, on the subscriber connection";
    case 'ssubscribe':
    case 'sunsubscribe':
      return 'sharded pub/sub (a cluster only)';
    case 'psubscribe':
      return 'not used by the library';
    case 'info':
      return 'ready check of a new subscriber connection (ioredis)';
    case 'client|setinfo':
      return 'sent by ioredis on a new connection';
    default:
      return '';
  }
}

const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '—');
const code = (name: string) => {
  const [cmd, script] = name.split(' ');
  return `\`${cmd!.toUpperCase().replace('|', ' ')}\`${script ? ` ${script}` : ''}`;
};

function table(m: Measurement): string[] {
  const per = (n: number) => f2(n / m.loads);
  const gets = m.sent.get ?? 0;
  const hits = gets - m.emptyGets;
  const out: string[] = [];
  out.push('| command | what it is | sent by the 4 caches | per refresh | run by Redis | per refresh |');
  out.push('|---|---|---:|---:|---:|---:|');
  const row = (label: string, text: string, sent: number | undefined, ran: number | undefined, bold = false) => {
    const b = (v: string) => (bold ? `**${v}**` : v);
    out.push(`| ${b(label)} | ${text} | ${sent === undefined ? '' : b(String(sent))} | ${sent === undefined ? '' : b(per(sent))} | ${ran === undefined ? '' : b(String(ran))} | ${ran === undefined ? '' : b(per(ran))} |`);
  };
  // What the caches sent beyond the GETs that found the value: the cost of the refreshes.
  const scripts = Object.keys(m.sent)
    .filter((n) => n.startsWith('evalsha ') || n.startsWith('eval '))
    .sort((a, b) => (a.endsWith('lookup') ? -1 : b.endsWith('lookup') ? 1 : a.localeCompare(b)));
  const others = Object.keys(m.sent).filter((n) => n !== 'get' && !scripts.includes(n) && !PUBSUB.includes(n)).sort();
  let beyond = m.emptyGets;
  for (const name of scripts) {
    row(code(name), what(name, m), m.sent[name]!, undefined);
    beyond += m.sent[name]!;
  }
  row('`GET`, found nothing', 'the value had expired', m.emptyGets, undefined);
  for (const name of [...PUBSUB.filter((n) => n !== 'punsubscribe' || (m.sent[n] ?? 0) > 0), ...others]) {
    const sent = m.sent[name] ?? 0;
    beyond += sent;
    row(code(name), what(name, m), sent, m.server[name] ?? 0);
  }
  row('round trips beyond the hits', '', beyond, undefined, true);
  row('`GET`, found the value (hits)', `${f2(gets / m.calls)} \`GET\` per call`, hits, undefined);
  // How Redis counts them: an EVALSHA as one, and every command a script runs on its own.
  const evalsha = scripts.filter((n) => n.startsWith('evalsha ')).reduce((a, n) => a + m.sent[n]!, 0);
  const evals = scripts.filter((n) => n.startsWith('eval ')).reduce((a, n) => a + m.sent[n]!, 0);
  row('`EVALSHA`, all scripts', '', evalsha, m.server.evalsha ?? 0);
  if (evals > 0 || m.server.eval !== undefined) row('`EVAL`, all scripts', '', evals, m.server.eval ?? 0);
  row('`GET`, all', 'plain ones sent, and those the scripts run', gets, m.server.get ?? 0);
  for (const name of IN_SCRIPTS) if ((m.server[name] ?? 0) !== 0 || (m.sent[name] ?? 0) !== 0) row(code(name), 'run inside the scripts', m.sent[name] ?? 0, m.server[name] ?? 0);
  const ranBeyond = Object.values(m.server).reduce((a, n) => a + n, 0) - hits;
  row('Redis commands beyond the hits', 'all it ran, less the `GET`s that found the value', undefined, ranBeyond, true);
  return out;
}

/** The totals of the summary table. */
function totals(m: Measurement) {
  const gets = m.sent.get ?? 0;
  const sentAll = Object.values(m.sent).reduce((a, n) => a + n, 0);
  const ranAll = Object.values(m.server).reduce((a, n) => a + n, 0);
  const hits = gets - m.emptyGets;
  return {
    beyond: sentAll - hits,
    lookups: (m.sent['evalsha lookup'] ?? 0) + (m.sent['eval lookup'] ?? 0),
    pubsub: PUBSUB.reduce((a, n) => a + (m.sent[n] ?? 0), 0),
    ranBeyond: ranAll - hits,
  };
}

/** Commands sent outside scripts whose count Redis does not confirm (other than those scripts also run). */
function mismatches(m: Measurement): string[] {
  const bare: Record<string, number> = {};
  for (const [name, n] of Object.entries(m.sent)) bare[name.split(' ')[0]!] = (bare[name.split(' ')[0]!] ?? 0) + n;
  const names = new Set([...Object.keys(bare), ...Object.keys(m.server)]);
  return [...names].filter((n) => n !== 'get' && !IN_SCRIPTS.includes(n) && (bare[n] ?? 0) !== (m.server[n] ?? 0)).map((n) => `${code(n)} sent ${bare[n] ?? 0}, Redis counted ${m.server[n] ?? 0}`);
}

function churn(m: Measurement): string {
  const events = m.pubsubBy.flatMap((list, worker) => list.map((e) => ({ ...e, worker })));
  const isSub = (e: { name: string }) => e.name === 'subscribe' || e.name === 'ssubscribe' || e.name === 'psubscribe';
  const subs = events.filter(isSub);
  const unsubs = events.filter((e) => !isSub(e));
  const connections = m.sent.info ?? 0;
  if (events.length === 0) {
    const why = (m.lookups.wait ?? 0) === 0 ? 'no process waited on the channel' : "every process that waited found the key's channel still subscribed";
    return `**SUBSCRIBE/UNSUBSCRIBE in the window: none** (0 per refresh): ${why}${connections > 0 ? `; ${connections} subscriber connection(s) opened` : ''}.`;
  }
  // Per process, from each UNSUBSCRIBE to its next SUBSCRIBE: within the linger, the channel's linger doubles.
  const gaps: number[] = [];
  for (const list of m.pubsubBy) {
    list.forEach((e, i) => {
      if (isSub(e)) return;
      const next = list.slice(i + 1).find(isSub);
      if (next) gaps.push(next.at - e.at);
    });
  }
  const late = gaps.filter((g) => g > CHANNEL_LINGER_MS).length;
  const half = m.ms / 2;
  const count = (list: typeof events, first: boolean) => list.filter((e) => (first ? e.at < half : e.at >= half)).length;
  const byProcess = m.pubsubBy.map((list, i) => `${list.filter(isSub).length}/${list.filter((e) => !isSub(e)).length} (led ${m.loadsBy[i]})`);
  return (
    `**SUBSCRIBE/UNSUBSCRIBE in the window: ${subs.length} SUBSCRIBE, ${unsubs.length} UNSUBSCRIBE** (${f2(events.length / m.loads)} per refresh), ` +
    `${count(subs, true)} and ${count(unsubs, true)} in the first half of the window, ${count(subs, false)} and ${count(unsubs, false)} in the second; ` +
    `by process (subscribes/unsubscribes, and how many of the refreshes it led): ${byProcess.join(', ')}; ${connections} subscriber connection(s) opened in the window. ` +
    (gaps.length === 0
      ? ''
      : `From an UNSUBSCRIBE to the same process's next SUBSCRIBE: ${summary(gaps, 0)} ms (median [min–max] of ${gaps.length}); ${late} of them longer than the ${CHANNEL_LINGER_MS} ms linger` +
        (late > 0 ? ' (a channel subscribed again later than its linger after being dropped starts over at 1 s instead of lingering twice as long).' : '.'))
  );
}

function section(ctx: BenchContext, results: Measurement[], plan: { warmupMs: number; windowMs: number }, seconds: number, load: [number, number]): string {
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
      `with \`INCR\` (and reads the server's \`TIME\`) in a script on a separate connection, then waits 50 ms. After a warm-up of ${plan.warmupMs / 1000} s, a window of about ${plan.windowMs / 1000} s of whole refresh cycles is measured: a listener on the key's channel ` +
      `hears every commit, and the window starts and ends ${BOUNDARY_AT * 100} % of a TTL after one (mid-cycle), with every lane paused for the moment of the snapshot, so that no call, ` +
      'loader or refresh is in flight when the counts are read. *Refreshes* are the loader runs in the window; *cycles* are the groups they form on the Redis server\'s clock (the counting script also answers `TIME`; runs that start less than half a TTL apart count as one cycle). ' +
      "Two counts per command: *sent by the 4 caches*, tallied in each process on the cache's connections (its client and the subscriber connection the library opens from it; every " +
      'command written to the socket, `EVALSHA` by script and the lookup script by its answer, `GET` by whether it found a value); and *run by Redis*, the `INFO commandstats` difference on an inspector connection, ' +
      "less the inspector's own `INFO` and the loaders' counting scripts (`EVAL` of `INCR` and `TIME`). Redis also counts every command a script runs, so its `GET` includes the scripts' and `SET`, `PTTL`, `DEL`, `PUBLISH` are the scripts' alone. " +
      '*Round trips beyond the hits* is every command the caches sent except the `GET`s that found the value.',
  );
  out.push('');
  out.push(
    'What the commands are (`src/store/cache-scripts.ts`, `src/store/redis-backend.ts`, `src/core/miss-protocol.ts`): a process that believes the value fresh reads it with a plain `GET` ' +
      '(concurrent callers of a process share one flight and one `GET`). Once its own record of the expiry has passed (it runs from the value\'s creation, taken before the commit, so it ends a moment before the key expires in Redis) ' +
      'or a `GET` finds nothing, it runs the *lookup-or-lead* script: `GET` the value; if it is missing (or, with `staleWhileRevalidate`, past its `ttl`), `SET NX PX` of the lead lock and, when that fails, `PTTL` of the lock (for a stale value also a `GET` of the lock). ' +
      'One process gets the lead; the others are told to wait: a waiter subscribes to the key\'s channel and runs the lookup once more (so a commit made before its subscription is not missed), then sleeps until the announcement. ' +
      'A lookup that still finds the value is answered as a hit. The leader runs the loader and then the *commit* script: `GET` the lock to check its token, `DEL` it, `SET` the value, `PUBLISH` it inline on the channel. ' +
      'With `staleWhileRevalidate`, a lookup past the `ttl` answers the stale value at once (one caller takes the lead and refreshes in the background), and the other processes do not wait; ' +
      'a process answered with the stale value keeps no record of a fresh value, so each of its next flights runs the lookup script again until the new value is committed (in the leading process too, without trying the lead). ' +
      'The subscriber connection keeps a channel subscribed for a linger (1 s) after its last waiter left; a channel subscribed again within its linger of being dropped lingers twice as long the next time, up to 60 s; ' +
      'a subscriber connection left without channels closes 500 ms later (`src/redis/subscriber.ts`).',
  );
  out.push('');
  out.push('| configuration | loader runs per cycle | round trips per refresh beyond the hits | of which lookup scripts | SUBSCRIBE + UNSUBSCRIBE per refresh | Redis commands per refresh beyond the hits | `GET` per call |');
  out.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const m of results) {
    const t = totals(m);
    out.push(
      `| ${m.config.title} | ${f2(m.loads / m.cycles)} | ${f2(t.beyond / m.loads)} | ${f2(t.lookups / m.loads)} | ${f2(t.pubsub / m.loads)} | ${f2(t.ranBeyond / m.loads)} | ${f2((m.sent.get ?? 0) / m.calls)} |`,
    );
  }
  for (const m of results) {
    const mism = mismatches(m);
    out.push('');
    out.push(`### ${m.config.title}`);
    out.push('');
    out.push(
      `Window ${(m.ms / 1000).toFixed(1)} s: ${m.calls} calls answered (${((m.calls / m.ms) * 1000).toFixed(0)}/s), ${m.errors} error(s)${m.firstError ? ` (first: ${m.firstError})` : ''}; ` +
        `${m.loads} refreshes (loader runs; by process ${m.loadsBy.join(', ')}) in ${m.cycles} cycles: **${f2(m.loads / m.cycles)} loader run(s) per cycle** fleet-wide, ` +
        `${m.messages} commit(s) heard.`,
    );
    out.push('');
    out.push(...table(m));
    out.push('');
    out.push(churn(m));
    if (mism.length > 0) out.push(`Counts sent and counted by Redis that differ (outside scripts): ${mism.join('; ')}.`);
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
  return section(ctx, results, plan, (performance.now() - started) / 1000, [load0, os.loadavg()[0]!]);
}
