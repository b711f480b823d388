/**
 * Tags and the coherent L1 (issue 13, "Benchmark"), in one run on one throwaway Redis:
 *
 * 1. Propagation. 4 processes (`bench/scenarios/coherence.ts`) hold a key in an L1 with a 60 s
 *    TTL; one of them (a different one each round) invalidates its tag, deletes it or stores
 *    a new value; how long after that write resolved do all 4 stop answering from their old
 *    copy, and return the new value? Next to it, in every round just before the write, a raw
 *    `PUBLISH` from the same process to a plain ioredis subscriber in each of the 4: how long
 *    after the PUBLISH reply the last one received it.
 * 2. L1 hits. `getOrCompute` answered from the L1 against a synchronous and an awaited
 *    lru-cache `get` and bentocache's memory tier, in one fresh process, in interleaved slices.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Message } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import { startRedis, type RedisServer } from '../tools/redis-server.js';
import { tagKeys } from '../src/store/key.js';
import { parseStamp } from '../src/store/tags.js';
import { histogram, percentile, ratio, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const PROCESSES = 4;
const KINDS = ['invalidate', 'delete', 'set'] as const;
type Kind = (typeof KINDS)[number];
const KIND_NAMES: Record<Kind, string> = {
  invalidate: '`invalidateTags([tag])`',
  delete: '`delete(key)`',
  set: '`set(key, value)` (the value travels inline)',
};
/** The issue's target: within 2× of the raw delivery. */
const TARGET_RATIO = 2;

/** `count` processes of the coherence scenario on `url`. */
const fleetOf = (count: number, label: string, url: string) => Fleet.start('bench/scenarios/coherence.ts', count, { url }, { label, readyTimeoutMs: 60_000 });

// --- 1. propagation -------------------------------------------------------------------------

/** One round of one kind: every time in ns (CLOCK_MONOTONIC, shared by the processes). */
interface Round {
  /** Which repeat (a series of rounds of every kind) it belongs to. */
  repeat: number;
  kind: Kind;
  writer: number;
  publishCall: number;
  publishReply: number;
  /** When each process received the raw message. */
  received: number[];
  writeCall: number;
  writeResolved: number;
  /** When each process's first read not answered from the L1 with the old value started. */
  dropped: number[];
  /** When each process's first read that returned the new value ended. */
  fresh: number[];
  /** Loader runs in all 4 processes caused by the round's write (until the key's next round). */
  runs: number;
  /** Each loader run of the round: its process, and when it started (ms since the epoch; invalidate: since the tag's stamp). */
  runStarts: { worker: number; at: number }[];
  /** Which reader saw the drop first, per process: `message` (right after a delivery), `timer`, `writer` (the writer's own read after its write). */
  by: string[];
}

interface Propagation {
  rounds: Round[];
  /** Repeats that ran (fewer than planned if the time budget ran out). */
  repeats: number;
  timeouts: Record<Kind, number>;
  /** Loader runs of the reads that warm a key before a round (none expected: the key is in every L1 already). */
  warmRuns: Record<Kind, number>;
  seconds: number;
}

async function propagation(redis: RedisServer, plan: { repeats: number; rounds: number; budgetMs: number }, log: (msg: string) => void): Promise<Propagation> {
  const started = performance.now();
  const fleet = await fleetOf(PROCESSES, 'coherence worker', redis.url);
  const workers = fleet.members;
  const rounds: Round[] = [];
  const timeouts: Record<Kind, number> = { invalidate: 0, delete: 0, set: 0 };
  let id = 0;
  let control: ReturnType<RedisServer['client']> | undefined;
  const warmRuns: Record<Kind, number> = { invalidate: 0, delete: 0, set: 0 };
  const pending = new Map<Kind, { round: Round; stamp: number }>();
  /** Gives the last round of `kind` its loader runs (per process, ms since the epoch). */
  const settle = (kind: Kind, perWorker: number[][]) => {
    const p = pending.get(kind);
    if (!p) return;
    pending.delete(kind);
    p.round.runs = perWorker.reduce((a, runs) => a + runs.length, 0);
    p.round.runStarts = perWorker.flatMap((runs, worker) => runs.map((t) => ({ worker, at: t - p.stamp })));
  };
  try {
    control = redis.client();
    const versions: Record<Kind, number> = { invalidate: 0, delete: 0, set: 0 };
    const total = plan.repeats * plan.rounds;
    for (let r = 0; r < total && performance.now() - started < plan.budgetMs; r++) {
      const repeat = Math.floor(r / plan.rounds);
      // The kinds take turns in a rotating order, each with its own writer (every process writes in turn).
      for (let k = 0; k < KINDS.length; k++) {
        const kindIndex = (k + r) % KINDS.length;
        const kind = KINDS[kindIndex]!;
        const writer = (r + kindIndex) % PROCESSES;
        const key = `bench:coherence:${kind}`;
        const tags = kind === 'invalidate' ? ['bench:user:1', 'bench:other'] : undefined;
        const version = ++versions[kind];
        for (const w of workers) w.send({ cmd: 'arm', kind, key, tags, version });
        const armed = await Promise.all(workers.map((w) => w.take('armed', 20_000)));
        settle(kind, armed.map((m) => m.previousRuns as number[]));
        warmRuns[kind] += armed.reduce((a, m) => a + Number(m.warmRuns), 0);
        const w0 = workers[writer]!;
        // The reference: a raw PUBLISH from the writer's process to a plain subscriber in each process.
        const rawId = ++id;
        w0.send({ cmd: 'publish', id: rawId });
        const published = await w0.take('published', 10_000);
        const raws = await Promise.all(workers.map((w) => w.take('raw', 10_000)));
        if (raws.some((m) => m.id !== rawId)) throw new Error(`raw message ${rawId} expected, got ${raws.map((m) => m.id).join(',')}`);
        w0.send({ cmd: 'write', kind, key, tags, version });
        const written = await w0.take('written', 10_000);
        const seen: Message[] = await Promise.all(workers.map((w) => w.take('seen', 20_000)));
        if (seen.some((s) => s.timedOut === true || s.fresh === undefined || s.dropped === undefined)) {
          timeouts[kind]++;
          continue;
        }
        const stamp = kind === 'invalidate' ? parseStamp(await control!.get(tagKeys('dogpile', tags![0]!).stamp)).hard : 0;
        const round: Round = {
          repeat,
          kind,
          writer,
          publishCall: published.call as number,
          publishReply: published.reply as number,
          received: raws.map((m) => m.at as number),
          writeCall: written.call as number,
          writeResolved: written.resolved as number,
          dropped: seen.map((s) => s.dropped as number),
          fresh: seen.map((s) => s.fresh as number),
          runs: Number.NaN,
          runStarts: [],
          by: seen.map((s) => String(s.by)),
        };
        rounds.push(round);
        // Its loader runs are known at the key's next arm (a run may start after every process returned the new value).
        pending.set(kind, { round, stamp });
      }
      if ((r + 1) % plan.rounds === 0) log(`propagation: repeat ${repeat + 1} of ${plan.repeats} done`);
    }
    for (const kind of KINDS) {
      for (const w of workers) w.send({ cmd: 'collect', key: `bench:coherence:${kind}` });
      settle(kind, (await Promise.all(workers.map((w) => w.take('collected', 10_000)))).map((m) => m.runs as number[]));
    }
  } finally {
    control?.disconnect();
    if (!(await fleet.close())) log('a coherence worker did not exit cleanly');
  }
  return { rounds, repeats: Math.max(0, ...rounds.map((r) => r.repeat + 1)), timeouts, warmRuns, seconds: (performance.now() - started) / 1000 };
}

const ms = (ns: number) => ns / 1e6;
const last = (times: number[]) => Math.max(...times);

interface Lags {
  raw: number[];
  dropped: number[];
  fresh: number[];
}

/** The lags of each round (ms): from the write's reply (`from: 'reply'`) or from its call. */
function lags(rounds: Round[], from: 'reply' | 'call'): Lags {
  return {
    raw: rounds.map((r) => ms(last(r.received) - (from === 'reply' ? r.publishReply : r.publishCall))),
    dropped: rounds.map((r) => ms(last(r.dropped) - (from === 'reply' ? r.writeResolved : r.writeCall))),
    fresh: rounds.map((r) => ms(last(r.fresh) - (from === 'reply' ? r.writeResolved : r.writeCall))),
  };
}


const f2 = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(2));

/** Per repeat, the p50 and p99 (ms) of each lag of `kind`, and the ratios to the raw delivery (a lag ≤ 0 counts as 0). */
function perRepeat(p: Propagation, kind: Kind, from: 'reply' | 'call') {
  return Array.from({ length: p.repeats }, (_, repeat) => {
    const l = lags(p.rounds.filter((r) => r.kind === kind && r.repeat === repeat), from);
    const at = (q: number) => {
      const raw = percentile(l.raw, q);
      const dropped = percentile(l.dropped, q);
      const fresh = percentile(l.fresh, q);
      return { raw, dropped, fresh, droppedRatio: Math.max(0, dropped) / raw, freshRatio: Math.max(0, fresh) / raw };
    };
    return { p50: at(50), p99: at(99) };
  });
}

function lagTable(p: Propagation, from: 'reply' | 'call'): string[] {
  const start = from === 'reply' ? 'resolved' : 'called';
  const head = `| write, percentile over the rounds | raw PUBLISH: ${from === 'reply' ? 'reply' : 'sent'} → last process received it | copy dropped: ${start} → last process | vs raw | new value returned: ${start} → last process | vs raw |`;
  const rows = KINDS.flatMap((kind) => {
    const reps = perRepeat(p, kind, from);
    return (['p50', 'p99'] as const).map((q) => {
      const col = (f: (x: ReturnType<typeof perRepeat>[number]['p50']) => number, digits = 2) => summary(reps.map((r) => f(r[q])), digits);
      return `| ${KIND_NAMES[kind]}, ${q} | ${col((x) => x.raw)} | ${col((x) => x.dropped)} | ${col((x) => x.droppedRatio, 1)}× | ${col((x) => x.fresh)} | ${col((x) => x.freshRatio, 1)}× |`;
    });
  });
  return [head, '| --- | --- | --- | --- | --- | --- |', ...rows];
}

// --- 2. L1 hits ---------------------------------------------------------------------------

const HIT_CONTENDERS: { id: string; name: string; inflight: boolean }[] = [
  { id: 'lru-sync', name: 'lru-cache `get`, synchronous loop (reference)', inflight: false },
  { id: 'lru-await', name: 'lru-cache `get` in an async function, awaited (reference)', inflight: true },
  { id: 'bento', name: "bentocache `getOrSet`, memory tier (`memoryDriver({})`: the driver's default, values serialized)", inflight: true },
  { id: 'bento-raw', name: 'bentocache `getOrSet`, memory tier, `memoryDriver({ serialize: false })`', inflight: true },
  { id: 'dogpile', name: 'dogpile-guard `getOrCompute(key, loader, ttl)`, Redis + `l1` (L1 hit)', inflight: true },
  { id: 'dogpile-tags', name: 'dogpile-guard `getOrCompute(key, loader, { ttl, tags })`, Redis + `l1` (L1 hit of a tagged entry)', inflight: true },
  { id: 'dogpile-peek', name: 'dogpile-guard `peek(key)`, synchronous loop, Redis + `l1` (L1 hit)', inflight: false },
];

type Slices = Record<string, number[]>;

async function hitRun(redis: RedisServer, quick: boolean): Promise<{ seq: Slices; inflight: Slices; slices: number; sliceMs: number }> {
  const slices = quick ? 3 : 20;
  const sliceMs = quick ? 30 : 100;
  const warmup = quick ? 2000 : 20_000;
  const fleet = await fleetOf(1, 'coherence hit worker', redis.url);
  const w = fleet.member(0);
  const rate = (m: Message): Slices =>
    Object.fromEntries((m.results as { id: string; slices: { ops: number; ms: number }[] }[]).map((r) => [r.id, r.slices.map((s) => (s.ops * 1000) / s.ms)]));
  try {
    w.send({ cmd: 'hits', mode: 'seq', contenders: HIT_CONTENDERS.map((c) => c.id), slices, sliceMs, warmup });
    const seq = rate(await w.take('hitResult', 120_000));
    w.send({ cmd: 'hits', mode: 'inflight', contenders: HIT_CONTENDERS.filter((c) => c.inflight).map((c) => c.id), slices, sliceMs, warmup });
    const inflight = rate(await w.take('hitResult', 120_000));
    return { seq, inflight, slices, sliceMs };
  } finally {
    await fleet.close();
  }
}

const median = (v: number[] | undefined) => (v && v.length > 0 ? percentile(v, 50) : Number.NaN);

// --- main -----------------------------------------------------------------------------------

export default async function coherenceBench(ctx: BenchContext): Promise<string> {
  const plan = ctx.quick ? { repeats: 1, rounds: 10, budgetMs: 15_000 } : { repeats: 3, rounds: 100, budgetMs: 60_000 };
  const loadStart = os.loadavg()[0]!;
  const started = performance.now();
  const redis = await startRedis();
  let prop: Propagation;
  let hit: Awaited<ReturnType<typeof hitRun>>;
  try {
    prop = await propagation(redis, plan, ctx.log);
    for (const kind of KINDS) {
      const rs = prop.rounds.filter((r) => r.kind === kind);
      const l = lags(rs, 'reply');
      ctx.log(
        `${kind}: ${rs.length} rounds (${prop.timeouts[kind]} timed out); raw p50 ${f2(percentile(l.raw, 50))} p99 ${f2(percentile(l.raw, 99))} ms; ` +
          `dropped p50 ${f2(percentile(l.dropped, 50))} p99 ${f2(percentile(l.dropped, 99))} ms; new value p50 ${f2(percentile(l.fresh, 50))} p99 ${f2(percentile(l.fresh, 99))} ms ` +
          `(from the write resolving); loader runs per round: ${histogram(rs.map((r) => r.runs))}`,
      );
    }
    hit = await hitRun(redis, ctx.quick);
    for (const c of HIT_CONTENDERS) {
      ctx.log(`${c.id}: ${summary(hit.seq[c.id]!.map((v) => v / 1000), 0)} k ops/s sequential${c.inflight ? `, ${summary(hit.inflight[c.id]!.map((v) => v / 1000), 0)} k ops/s with 100 in flight` : ''}`);
    }
  } finally {
    await redis.stop();
  }
  return report({ ctx, prop, hit, load: [loadStart, os.loadavg()[0]!], seconds: (performance.now() - started) / 1000 });
}

function report(input: {
  ctx: BenchContext;
  prop: Propagation;
  hit: Awaited<ReturnType<typeof hitRun>>;
  load: [number, number];
  seconds: number;
}): string {
  const { prop, hit } = input;
  const out: string[] = [];
  const perKind = Math.min(...KINDS.map((k) => prop.rounds.filter((r) => r.kind === k).length));
  // Which read saw the drop first, in the writing process and in the 3 others.
  const by = { writer: new Map<string, number>(), others: new Map<string, number>() };
  for (const r of prop.rounds) {
    r.by.forEach((b, i) => {
      const m = i === r.writer ? by.writer : by.others;
      m.set(b, (m.get(b) ?? 0) + 1);
    });
  }
  const list = (m: Map<string, number>) => [...m].map(([k, v]) => `${k} ${v}`).join(', ');
  out.push('## Tags and the coherent L1: propagation and L1 hits (`bench/coherence.bench.ts`)');
  out.push('');
  out.push(
    `One throwaway Redis; the whole section took ${input.seconds.toFixed(0)} s${input.ctx.quick ? ' — a quick run (BENCH_QUICK=1)' : ''}. ` +
      `The machine was shared with other work: 1-minute load average ${input.load[0].toFixed(1)} at the start and ${input.load[1].toFixed(1)} at the end on ${os.cpus().length} CPUs.`,
  );
  out.push('');
  out.push('### Propagation to 4 processes');
  out.push('');
  out.push(
    `${PROCESSES} processes, each with \`createCache({ redis, l1: { ttl: '60s' } })\` on its own connection, hold the key in their L1 (a read answered from the L1 before every round). ` +
      `In each round, one process (each in turn) first sends a raw \`PUBLISH\` on a plain ioredis connection, received by a plain ioredis subscriber in each of the 4 processes; ` +
      `once all 4 have it, the same process runs the write. The kinds take turns; ${perKind} rounds of each in all, in ${prop.repeats} repeat(s) (bounded in time). ` +
      'p50 and p99 are taken over the rounds of one repeat (nearest rank: the p99 of 100 rounds is the slowest one); each cell is the median [min–max] over the repeats. ' +
      'Times are `process.hrtime.bigint()` (CLOCK_MONOTONIC: one clock for all processes of the machine).',
  );
  out.push('');
  out.push(
    '- *Copy dropped*: the start of a process\'s first read not answered from its L1 with the old value (for `set`: answered with the new one). Each process reads the key ' +
      "right after each message its cache's subscriber connection delivers (a listener added after the library's own, so the library has applied the message), and every 1 ms on a timer; " +
      'the writer also reads right after its write resolves. This is the moment the process acted on the delivery, measured the same way as the raw subscriber\'s arrival. ' +
      'One difference in load: a raw message makes each process write one line to its parent, while after `delete` or `invalidateTags` the processes that dropped their copy first ' +
      'start their recompute (round trips to Redis) on the same 2 cores while the last one is still to be woken.',
  );
  out.push(
    '- *New value returned*: the end of the first read that returned the new value. After `invalidateTags` or `delete` the read is a miss, meant to coalesce on one loader run in the 4 processes ' +
      '(the loader returns at once; the runs are counted below), so this includes the lookup-or-lead round trip, the store-and-announce and the waiters\' wake-up. After `set` the new value arrived with the announcement and is an L1 hit.',
  );
  out.push(
    `- Which read saw the drop first, over all rounds: in the writing process ${list(by.writer)}; in the 3 others ${list(by.others)} ` +
      "(`message`: the read after a delivery; `writer`: the writer's read after its write resolved; `timer`: the 1 ms reader, which in the writer sees the copy its own write dropped before the write resolved).",
  );
  out.push(
    `- Loader runs per round in all 4 processes (counted until the key's next round; rounds with that many runs): ${KINDS.map((k) => `${k} ${histogram(prop.rounds.filter((r) => r.kind === k).map((r) => r.runs))}`).join('; ')}. ` +
      `The reads that warm the key before a round (until it is answered from the L1) ran the loader ${KINDS.map((k) => `${prop.warmRuns[k]} (${k})`).join(', ')} times in all, the first fill of each key included.`,
  );
  out.push('');
  out.push('From the write resolving (the PUBLISH reply for the raw delivery), ms:');
  out.push('');
  out.push(...lagTable(prop, 'reply'));
  out.push('');
  out.push('From the write being called (the PUBLISH being sent), ms:');
  out.push('');
  out.push(...lagTable(prop, 'call'));
  out.push('');
  // Targets: the issue's definition (from the write resolving, against the PUBLISH reply), on the medians over the repeats.
  const targets: string[] = [];
  for (const kind of KINDS) {
    const reps = perRepeat(prop, kind, 'reply');
    const calls = perRepeat(prop, kind, 'call');
    const med = (f: (r: ReturnType<typeof perRepeat>[number]) => number, list = reps) => median(list.map(f));
    const r50 = med((r) => r.p50.droppedRatio);
    const r99 = med((r) => r.p99.droppedRatio);
    const met = r50 <= TARGET_RATIO && r99 <= TARGET_RATIO;
    targets.push(
      `${KIND_NAMES[kind]} **${met ? 'met' : 'missed'}**: copy dropped in all 4 at p50 ${r50.toFixed(1)}×, p99 ${r99.toFixed(1)}× the raw delivery ` +
        `(${f2(med((r) => r.p50.dropped))} / ${f2(med((r) => r.p99.dropped))} ms after it resolved, against ${f2(med((r) => r.p50.raw))} / ${f2(med((r) => r.p99.raw))} ms after the PUBLISH reply); ` +
        `from the call ${med((r) => r.p50.droppedRatio, calls).toFixed(1)}× and ${med((r) => r.p99.droppedRatio, calls).toFixed(1)}×`,
    );
  }
  const invalidations = prop.rounds.filter((r) => r.kind === 'invalidate');
  const doubled = invalidations.filter((r) => r.runs > 1);
  const inTwo = doubled.filter((r) => new Set(r.runStarts.map((s) => s.worker)).size > 1).length;
  const gaps = doubled.map((r) => Math.max(...r.runStarts.map((s) => s.at)) - Math.min(...r.runStarts.map((s) => s.at)));
  const sameMs = doubled.filter((r) => Math.min(...r.runStarts.map((s) => s.at)) <= 0).length;
  out.push('Target (issue 13): every L1 copy follows within 2× of the raw delivery (p50 and p99, medians over the repeats; a copy dropped before the write resolved counts as 0):');
  out.push('');
  for (const t of targets) out.push(`- ${t}.`);
  out.push(
    `- Not a target, but what a caller sees after a hard invalidation: the new value (a recompute) in all 4 processes ${f2(percentile(lags(invalidations, 'reply').fresh, 50))} ms after \`invalidateTags\` resolved (p50 over all rounds). ` +
      (doubled.length === 0
        ? `Every one of the ${invalidations.length} invalidation rounds ran the loader exactly once across the 4 processes: a process that finds the invalidated value looks past that value only (a newer one stored meanwhile is its answer), and a tag's stamp is written only once the clock has left the millisecond it names, so a recompute that follows it never counts as older.`
        : `${doubled.length} of ${invalidations.length} invalidation rounds ran the loader more than once (${inTwo} of them in more than one process, the last run starting ${summary(gaps, 0)} ms after the first; ` +
          `${sameMs} with a run started in the millisecond of the tag's stamp, which would count as older than the invalidation).`),
  );
  out.push('');
  // Hits.
  out.push('### L1 hits');
  out.push('');
  out.push(
    `One fresh process, one key, one value (\`{ id, name: 100 chars, tags: 3 strings }\`), every call awaited; the same calls with 100 in flight (100 lanes, each awaiting its calls in turn). ` +
      `Thousands of calls per second, median [min–max] over ${hit.slices} interleaved slices of ${hit.sliceMs} ms per contender (the order rotates every slice), after a warm-up; ` +
      "dogpile-guard's key is checked to be answered from the L1 before and after. bentocache " +
      `with only its memory tier (\`new BentoCache({ default: 'memory', stores: { memory: bentostore().useL1Layer(memoryDriver(…)) } })\`).`,
  );
  out.push('');
  const bSeq = median(hit.seq.bento);
  const bRawSeq = median(hit.seq['bento-raw']);
  const bIn = median(hit.inflight.bento);
  const bRawIn = median(hit.inflight['bento-raw']);
  out.push('| contender | sequential (k ops/s) | vs bentocache (default, `serialize: false`) | 100 in flight (k ops/s) | vs bentocache (default, `serialize: false`) |');
  out.push('| --- | --- | --- | --- | --- |');
  for (const c of HIT_CONTENDERS) {
    const s = median(hit.seq[c.id]);
    const f = median(hit.inflight[c.id]);
    out.push(
      `| ${c.name} | ${summary(hit.seq[c.id]!.map((v) => v / 1000), 0)} | ${ratio(s, bSeq, 1)}, ${ratio(s, bRawSeq, 1)} | ` +
        `${c.inflight ? summary(hit.inflight[c.id]!.map((v) => v / 1000), 0) : '—'} | ${c.inflight ? `${ratio(f, bIn, 1)}, ${ratio(f, bRawIn, 1)}` : '—'} |`,
    );
  }
  out.push('');
  const dSeq = median(hit.seq.dogpile);
  const dIn = median(hit.inflight.dogpile);
  const tSeq = median(hit.seq['dogpile-tags']);
  const tIn = median(hit.inflight['dogpile-tags']);
  const best = (a: number, b: number) => Math.max(a, b);
  const hitMet = dSeq >= best(bSeq, bRawSeq) && dIn >= best(bIn, bRawIn);
  const tagMet = tSeq >= best(bSeq, bRawSeq) && tIn >= best(bIn, bRawIn);
  out.push(
    `Target (issue 13): L1 hits at least at bentocache's rate — **${hitMet ? 'met' : 'missed'}** for a plain call (${ratio(dSeq, best(bSeq, bRawSeq), 1)} the faster bentocache configuration sequentially, ` +
      `${ratio(dIn, best(bIn, bRawIn), 1)} with 100 in flight), **${tagMet ? 'met' : 'missed'}** for a tagged one (${ratio(tSeq, best(bSeq, bRawSeq), 1)}, ${ratio(tIn, best(bIn, bRawIn), 1)}). ` +
      `Against an awaited lru-cache \`get\`: ${ratio(dSeq, median(hit.seq['lru-await']), 2)} sequentially (plain call), ${ratio(tSeq, median(hit.seq['lru-await']), 2)} (tagged).`,
  );
  out.push('');
  const syncGet = median(hit.seq['lru-sync']);
  const peekRatio = median(hit.seq['dogpile-peek']) / syncGet;
  out.push(
    `Target (issue 16): L1 hits at least 0.5× a synchronous lru-cache \`get\` — through \`getOrCompute\` ${ratio(dSeq, syncGet, 2)}: a promise-returning call cannot reach it ` +
      `(an awaited \`get\` in an async function is itself ${ratio(median(hit.seq['lru-await']), syncGet, 2)} the synchronous one); ` +
      `through the synchronous \`peek(key)\` ${peekRatio.toFixed(2)}× — **${peekRatio >= 0.5 ? 'met' : 'missed'}**.`,
  );
  return out.join('\n');
}
