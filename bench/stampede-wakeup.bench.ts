/**
 * A cold-key stampede across processes, and how fast its waiters wake, against a raw Redis
 * pub/sub delivery measured in the same run, on one throwaway Redis:
 *
 * 8 processes (`bench/scenarios/stampede-wakeup.ts`), each with one `createCache({ redis: client })`
 * on its own connection. In each round one `PUBLISH` on a control channel (a plain ioredis
 * subscriber in each process) starts the stampede of a new key: 500 `getOrCompute(key, loader,
 * 60_000)` calls per process in one loop; the loader waits 50 ms, and should run once
 * fleet-wide (counted with INCR). Each caller's wake-up is when its promise resolved, less when
 * the one loader run returned its value. Then the process whose loader ran sends a raw
 * `PUBLISH` of a ~100-byte payload that resolves 500 waiting promises in each process through
 * one listener: the same fan-out with nothing but the delivery. Times are
 * `process.hrtime.bigint()` (CLOCK_MONOTONIC, one clock for every process of the machine).
 *
 *   npm run bench -- stampede-wakeup        (writes bench/.out/stampede-wakeup.md)
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Message } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { sleep } from '../tools/basics.js';
import { histogram, median, percentile, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const PROCESSES = 8;
const CALLERS = 500;
/** The worker's `CONTROL_CHANNEL`: a message naming a round starts its stampede. */
const CONTROL_CHANNEL = 'bench:stampede:go';
/** The target: the waiters' p99 wake-up within 1.5× the raw delivery's p99. */
const TARGET_RATIO = 1.5;
/** A short pause between rounds, so one round's tail does not run into the next trigger. */
const PAUSE_MS = 50;

/** The percentiles of one set of latencies (ms). */
interface Spread {
  /** The first caller woken: the delivery's fixed delay, before any fan-out. */
  first: number;
  p50: number;
  p99: number;
  max: number;
}

const spread = (values: number[]): Spread => ({ first: Math.min(...values), p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values) });

/** What one process measured in one round (ns on the shared monotonic clock). */
interface ProcessRound {
  trigger: number;
  firstCall: number;
  loopEnd: number;
  firstCommand: number | undefined;
  firstCommandName: string | undefined;
  commands: number;
  commandTimes: number[];
  arrivals: number[];
  rawArrival: number;
  resolved: number[];
  loads: number[];
  raw: number[];
}

interface Round {
  index: number;
  /** Loader runs fleet-wide (the INCR counter). */
  runs: number;
  /** The process whose loader ran (the first one with a run), which also sent the raw PUBLISH. */
  leader: number;
  triggerSent: number;
  publishSent: number;
  processes: ProcessRound[];
}

async function runRounds(redis: RedisServer, plan: { warmup: number; rounds: number; budgetMs: number }, log: (msg: string) => void): Promise<{ rounds: Round[]; warmups: number }> {
  const started = performance.now();
  const fleet = await Fleet.start('bench/scenarios/stampede-wakeup.ts', PROCESSES, { url: redis.url }, { label: 'stampede worker', readyTimeoutMs: 90_000 });
  const workers = fleet.members;
  const control = redis.client();
  const rounds: Round[] = [];
  let warmups = 0;
  const all = (event: string, timeoutMs = 20_000) => Promise.all(workers.map((w) => w.take(event, timeoutMs)));
  try {
    log(`${PROCESSES} workers up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    for (let r = 0; r < plan.warmup + plan.rounds; r++) {
      // The warm-up rounds always run; the measured ones while the budget lasts (at least one).
      if (r > plan.warmup && performance.now() - started > plan.budgetMs) break;
      const key = `bench:stampede:key:${r}`;
      const runsKey = `bench:stampede:runs:${r}`;
      for (const w of workers) w.send({ cmd: 'arm', round: r, key, runsKey });
      await all('armed');
      const triggerSent = Number(process.hrtime.bigint());
      await control.publish(CONTROL_CHANNEL, String(r));
      const stampedes = await all('stampede');
      // The reference: 500 promises per process wait for one raw message from the leader's process.
      for (const w of workers) w.send({ cmd: 'raw-arm', round: r });
      await all('raw-armed');
      const leader = Math.max(
        0,
        stampedes.findIndex((m) => (m.loads as number[]).length > 0),
      );
      workers[leader]!.send({ cmd: 'publish', round: r });
      const published = await workers[leader]!.take('published');
      const raws: Message[] = await all('raw');
      const runs = Number(await control.get(runsKey));
      const round: Round = {
        index: r,
        runs,
        leader,
        triggerSent,
        publishSent: published.sent as number,
        processes: stampedes.map((m, i) => ({
          trigger: m.trigger as number,
          firstCall: m.firstCall as number,
          loopEnd: m.loopEnd as number,
          firstCommand: m.firstCommand as number | undefined,
          firstCommandName: m.firstCommandName as string | undefined,
          commands: m.commands as number,
          commandTimes: m.commandTimes as number[],
          arrivals: m.arrivals as number[],
          rawArrival: raws[i]!.arrival as number,
          resolved: m.resolved as number[],
          loads: m.loads as number[],
          raw: raws[i]!.resolved as number[],
        })),
      };
      if (r < plan.warmup) warmups++;
      else rounds.push(round);
      const w = wakeup(round);
      log(
        `round ${r}${r < plan.warmup ? ' (warm-up)' : ''}: ${runs} loader run(s); waiters p50 ${f2(w?.all.p50)} p99 ${f2(w?.all.p99)} max ${f2(w?.all.max)} ms; ` +
          `raw p50 ${f2(rawSpread(round).all.p50)} p99 ${f2(rawSpread(round).all.p99)} ms; leader ${leader}: first command ${f2(ms(round.processes[leader]!.firstCommand! - round.processes[leader]!.loopEnd))} ms from the loop's end`,
      );
      await sleep(PAUSE_MS);
    }
  } finally {
    control.disconnect();
    if (!(await fleet.close())) log('a stampede worker did not exit cleanly');
  }
  return { rounds, warmups };
}

const ms = (ns: number) => ns / 1e6;
const f2 = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(2));

/** The waiters' wake-up (ms after the loader returned) of all 8 processes and of the 7 others; undefined unless the loader ran exactly once. */
function wakeup(r: Round): { all: Spread; others: Spread } | undefined {
  const loads = r.processes.flatMap((p) => p.loads);
  if (r.runs !== 1 || loads.length !== 1) return undefined;
  const loaded = loads[0]!;
  const lat = (ps: ProcessRound[]) => ps.flatMap((p) => p.resolved.map((t) => ms(t - loaded)));
  return { all: spread(lat(r.processes)), others: spread(lat(r.processes.filter((_, i) => i !== r.leader))) };
}

/** The raw delivery (ms after the moment before the PUBLISH was sent) of all 8 processes and of the 7 others. */
function rawSpread(r: Round): { all: Spread; others: Spread } {
  const lat = (ps: ProcessRound[]) => ps.flatMap((p) => p.raw.map((t) => ms(t - r.publishSent)));
  return { all: spread(lat(r.processes)), others: spread(lat(r.processes.filter((_, i) => i !== r.leader))) };
}


/** The two runs: code paths nearly cold (a process's first stampedes), and warm (a process that has been through many). */
const PLANS = (quick: boolean) => [
  { label: 'cold', title: 'Code paths cold: 3 warm-up rounds (a process\'s first stampedes)', warmup: quick ? 1 : 3, rounds: quick ? 3 : 15, budgetMs: quick ? 20_000 : 60_000 },
  { label: 'warm', title: 'Code paths warm: 60 warm-up rounds (a process that has been through many stampedes)', warmup: quick ? 5 : 60, rounds: quick ? 3 : 15, budgetMs: quick ? 30_000 : 90_000 },
];

export default async function stampedeWakeupBench(ctx: BenchContext): Promise<string> {
  const loadStart = os.loadavg()[0]!;
  const started = performance.now();
  const redis = await startRedis();
  const runs: { plan: ReturnType<typeof PLANS>[number]; rounds: Round[]; warmups: number }[] = [];
  try {
    // Fresh worker processes for each run.
    for (const plan of PLANS(ctx.quick)) {
      ctx.log(`${plan.label}: ${plan.warmup} warm-up rounds, then ${plan.rounds}`);
      runs.push({ plan, ...(await runRounds(redis, plan, ctx.log)) });
    }
  } finally {
    await redis.stop();
  }
  return report({ ctx, runs, load: [loadStart, os.loadavg()[0]!], seconds: (performance.now() - started) / 1000 });
}

function report(input: { ctx: BenchContext; runs: { plan: { title: string; warmup: number; rounds: number }; rounds: Round[]; warmups: number }[]; load: [number, number]; seconds: number }): string {
  const out: string[] = [];
  out.push(`## Cold-key stampede wake-up: ${PROCESSES} processes × ${CALLERS} callers (bench/stampede-wakeup.bench.ts)`);
  out.push('');
  out.push(
    `Command: \`npm run bench -- stampede-wakeup\` (bench/.out/stampede-wakeup.md). One throwaway Redis; the section took ${input.seconds.toFixed(0)} s` +
      `${input.ctx.quick ? ' — a quick run (BENCH_QUICK=1)' : ''}; two runs, each with ${PROCESSES} fresh worker processes: ${input.runs.map((r) => `${r.rounds.length} measured rounds after ${r.warmups} warm-up round${r.warmups === 1 ? '' : 's'}`).join(', then ')}. ` +
      `The machine was shared with other work: 1-minute load average ${input.load[0].toFixed(1)} at the start and ${input.load[1].toFixed(1)} at the end on ${os.cpus().length} CPUs, ` +
      `for ${PROCESSES} Node processes, the parent and Redis.`,
  );
  out.push('');
  out.push(
    `${PROCESSES} processes (\`bench/scenarios/stampede-wakeup.ts\`), each with one \`createCache({ redis: client })\` on its own ioredis connection. ` +
      `In each round, a new cold key; one \`PUBLISH\` on a control channel, received by a plain ioredis subscriber in each process, starts the stampede: on it, each process ` +
      `calls \`getOrCompute(key, loader, 60_000)\` ${CALLERS} times in one synchronous loop (${PROCESSES * CALLERS} callers). ` +
      'The loader waits 50 ms and returns a small object; its runs are counted fleet-wide with an INCR on a separate connection. ' +
      'Times are `process.hrtime.bigint()` (CLOCK_MONOTONIC: one clock for all processes of the machine).',
  );
  out.push('');
  out.push(
    "- *Waiters' wake-up*: when a caller's promise resolved (its `then` ran), less the moment the one loader run returned its value to the library, in the process where it ran. " +
      `Per round, the first, p50, p99 and max over all ${PROCESSES * CALLERS} callers (the leader's own ${CALLERS} included), and over the ${(PROCESSES - 1) * CALLERS} callers of the other ${PROCESSES - 1} processes.`,
  );
  out.push(
    `- *Raw delivery* (the reference, same round): after the stampede, ${CALLERS} promises in each process wait for one message on a channel that a plain ioredis subscriber in each process listens to; ` +
      "one listener resolves them all. The leader's process sends one raw `PUBLISH` of a ~100-byte payload on a plain connection; " +
      "latency is when each promise resolved, less the moment before the PUBLISH was sent. The same percentiles, over all processes and over the other 7.",
  );
  out.push(
    "- *Setup vs lookup*: in each process, when the first call was made, when the loop of 500 calls returned, and when the library's first command after the trigger was handed to " +
      "the cache's client (the worker wraps that client's `sendCommand` to take the time: a measurement shim of the benchmark only).",
  );
  for (const run of input.runs) {
    out.push('');
    out.push(`### ${run.plan.title}`);
    out.push(...results(run.rounds));
  }
  return out.join('\n');
}

/** The tables, notes and targets of one run. */
function results(rounds: Round[]): string[] {
  const single = rounds.filter((r) => wakeup(r) !== undefined);
  const wakes = single.map((r) => wakeup(r)!);
  const raws = single.map(rawSpread);
  const col = (values: number[], digits = 2) => summary(values, digits);
  const q = ['first', 'p50', 'p99', 'max'] as const;
  const out: string[] = [];
  out.push('');
  out.push(
    `Per round, then the median [min–max] over the ${single.length} rounds with exactly one loader run, ms:`,
  );
  out.push('');
  out.push(
    `| percentile (per round) | waiters, all ${PROCESSES} processes | raw PUBLISH, all ${PROCESSES} | waiters ÷ raw | waiters, the other ${PROCESSES - 1} | raw PUBLISH, the other ${PROCESSES - 1} | waiters ÷ raw |`,
  );
  out.push('| --- | --- | --- | --- | --- | --- | --- |');
  for (const p of q) {
    out.push(
      `| ${p} | ${col(wakes.map((w) => w.all[p]))} | ${col(raws.map((w) => w.all[p]))} | ${col(
        wakes.map((w, i) => w.all[p] / raws[i]!.all[p]),
        1,
      )}× | ${col(wakes.map((w) => w.others[p]))} | ${col(raws.map((w) => w.others[p]))} | ${col(
        wakes.map((w, i) => w.others[p] / raws[i]!.others[p]),
        1,
      )}× |`,
    );
  }
  out.push('');
  // Setup vs lookup.
  const leaders = rounds.map((r) => r.processes[r.leader]!);
  const everyone = rounds.flatMap((r) => r.processes);
  const fromCall = (p: ProcessRound) => ms(p.firstCommand! - p.firstCall);
  const fromLoopEnd = (p: ProcessRound) => ms(p.firstCommand! - p.loopEnd);
  const loop = (p: ProcessRound) => ms(p.loopEnd - p.firstCall);
  const names = new Map<string, number>();
  for (const p of everyone) names.set(String(p.firstCommandName), (names.get(String(p.firstCommandName)) ?? 0) + 1);
  const triggerSpread = rounds.map((r) => ms(Math.max(...r.processes.map((p) => p.trigger)) - Math.min(...r.processes.map((p) => p.trigger))));
  const triggerLast = rounds.map((r) => ms(Math.max(...r.processes.map((p) => p.trigger)) - r.triggerSent));
  out.push(
    `- Setup vs lookup, median [min–max] over the rounds (the leader) and over rounds × processes (all ${PROCESSES}), ms: ` +
      `the loop of ${CALLERS} calls took ${col(leaders.map(loop))} in the leader, ${col(everyone.map(loop))} in all; ` +
      `the first command left ${col(leaders.map(fromCall), 3)} after the first call in the leader, ${col(everyone.map(fromCall), 3)} in all; ` +
      `relative to the end of the loop (negative: before the setup finished) ${col(leaders.map(fromLoopEnd), 3)} in the leader, ${col(everyone.map(fromLoopEnd), 3)} in all. ` +
      `The first command was ${[...names].map(([n, c]) => `\`${n}\` (${c})`).join(', ')}; commands on the cache's connection per process and round: ${col(everyone.map((p) => p.commands), 0)}.`,
  );
  out.push(
    `- The trigger reached the ${PROCESSES} processes within ${col(triggerSpread)} ms of each other (first to last receipt), the last ${col(triggerLast)} ms after the control PUBLISH was sent.`,
  );
  // The leader's commit: the last command it handed over in the round, after its loader returned.
  const commitLeft = single.map((r) => {
    const p = r.processes[r.leader]!;
    return ms(p.commandTimes[p.commandTimes.length - 1]! - p.loads[0]!);
  });
  const firstOther = (r: Round, times: (p: ProcessRound) => number[], from: number) =>
    ms(Math.min(...r.processes.filter((_, i) => i !== r.leader).flatMap((p) => times(p))) - from);
  const commitToFirst = single.map((r) => {
    const p = r.processes[r.leader]!;
    return firstOther(r, (q) => q.resolved, p.commandTimes[p.commandTimes.length - 1]!);
  });
  const rawToFirst = single.map((r) => firstOther(r, (q) => q.raw, r.publishSent));
  out.push(
    `- The fixed delay, split: the leader handed its commit (\`EVALSHA\`) to the client ${col(commitLeft, 3)} ms after its loader returned; ` +
      `the first caller of another process was woken ${col(commitToFirst, 3)} ms after that, where the raw PUBLISH woke its first ${col(rawToFirst, 3)} ms after it was sent.`,
  );
  const others = single.flatMap((r) => r.processes.filter((_, i) => i !== r.leader));
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  out.push(
    `- In each other process, median over rounds × processes: the announcement reached the library's subscriber ${col(single.flatMap((r) => r.processes.filter((_, i) => i !== r.leader).map((p) => ms(p.arrivals[0]! - r.processes[r.leader]!.commandTimes.at(-1)!))), 3)} ms after the commit was handed over ` +
      `(raw: ${col(single.flatMap((r) => r.processes.filter((_, i) => i !== r.leader).map((p) => ms(p.rawArrival - r.publishSent))), 3)} ms after the PUBLISH was sent); ` +
      `from there to its first / p99 caller woken ${col(others.map((p) => ms(sorted(p.resolved)[0]! - p.arrivals[0]!)), 3)} / ${col(others.map((p) => ms(percentile(p.resolved, 99) - p.arrivals[0]!)), 3)} ms ` +
      `(raw: ${col(others.map((p) => ms(sorted(p.raw)[0]! - p.rawArrival)), 3)} / ${col(others.map((p) => ms(percentile(p.raw, 99) - p.rawArrival)), 3)} ms).`,
  );
  out.push(`- Loader runs per round, fleet-wide (INCR counter): ${histogram(rounds.map((r) => r.runs))}.`);
  out.push('');
  const r99 = median(wakes.map((w, i) => w.all.p99 / raws[i]!.all.p99));
  const o99 = median(wakes.map((w, i) => w.others.p99 / raws[i]!.others.p99));
  const leaderBefore = leaders.filter((p) => fromLoopEnd(p) < 0).length;
  const once = rounds.filter((r) => r.runs === 1).length;
  out.push('Targets:');
  out.push('');
  out.push(
    `- Waiters' p99 wake-up within ${TARGET_RATIO}× the raw delivery's p99: **${single.length > 0 && r99 <= TARGET_RATIO ? 'met' : 'missed'}** — ` +
      `${r99.toFixed(2)}× over all ${PROCESSES} processes (${f2(median(wakes.map((w) => w.all.p99)))} ms against ${f2(median(raws.map((w) => w.all.p99)))} ms, medians over the rounds), ` +
      `${o99.toFixed(2)}× over the other ${PROCESSES - 1} (${f2(median(wakes.map((w) => w.others.p99)))} ms against ${f2(median(raws.map((w) => w.others.p99)))} ms).`,
  );
  out.push(
    `- The leader's lookup leaves before its other callers' setup is done: **${leaderBefore === rounds.length && rounds.length > 0 ? 'met' : 'missed'}** — ` +
      `in ${leaderBefore} of ${rounds.length} rounds the leader's first command left before its loop of ${CALLERS} calls returned ` +
      `(median ${f2(median(leaders.map(fromLoopEnd)))} ms relative to the loop's end, ${f2(median(leaders.map(fromCall)))} ms after the first call; the loop took ${f2(median(leaders.map(loop)))} ms).`,
  );
  out.push(
    `- Exactly one loader run fleet-wide per round: **${once === rounds.length && rounds.length > 0 ? 'met' : 'missed'}** — ${once} of ${rounds.length} rounds` +
      `${once === rounds.length ? '' : ` (${histogram(rounds.map((r) => r.runs))}; the other rounds are left out of the wake-up table)`}.`,
  );
  return out;
}
