/**
 * Coalesced callers and Redis hits (issue 16), each contender in a fresh child process
 * (`bench/coalesce-worker.ts`, run with --expose-gc):
 *
 * 1. Heap bytes held per coalesced caller: 10 000 callers of one cold key whose loader waits
 *    on a gate, against async-cache-dedupe, bentocache (memory tier), a bare `gate.then(v => v)`
 *    per caller, and what the harness itself allocates per caller (so the numbers read net).
 * 2. The time from opening the gate to the last caller answered, next to a bare fan-out of
 *    the same size timed in the same process.
 * 3. Redis hits (no L1) against a bare ioredis `getBuffer` + `v8.deserialize` of the same bytes,
 *    one read at a time and 100 in flight on distinct keys, in interleaved slices.
 *
 * dogpile-guard runs as the package ships it: `src/index.ts` bundled by esbuild (the bundler
 * under tsup) to one ES module in .tmp/bench-build, its dependencies left to node_modules.
 * COALESCE_BENCH_BASELINE=<another checkout> (its node_modules linked to the same directory)
 * adds that checkout's dogpile-guard, built the same way, as `@<commit>` contenders.
 *
 *   npm run bench -- coalesce        (writes bench/.out/coalesce.md)
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { NodeChild, root } from '../tools/child-process.js';
import { startRedis } from '../tools/redis-server.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const CALLERS = 10_000;

interface CoalesceResult {
  name: string;
  bytes: number[];
  ms: number[];
  bareMs: number[];
}
interface HitsResult {
  bytes: number;
  rates: Record<'seq' | 'inflight', Record<string, number[]>>;
}

/** Bundles `<checkout>/src/index.ts` like the published build (ESM, node20, packages external); returns the file. */
function build(checkout: string, name: string): string {
  const out = path.join(root, '.tmp', 'bench-build', name, 'index.js');
  execFileSync(
    path.join(root, 'node_modules', '.bin', 'esbuild'),
    [path.join(checkout, 'src', 'index.ts'), '--bundle', '--platform=node', '--format=esm', '--target=node20', '--packages=external', `--outfile=${out}`, '--log-level=warning'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return out;
}

/** Runs the worker once and returns its result line. */
async function runWorker<T>(label: string, args: string[]): Promise<T> {
  // Its own builds are bundled here; its `../src` imports stay with tsx (the "sources run by tsx" row).
  const env = { ...process.env, DOGPILE_BENCH_BUILDS: '[]' };
  const child = NodeChild.tsx('bench/coalesce-worker.ts', args, { nodeArgs: ['--expose-gc'], stdin: 'ignore', env });
  try {
    const line = await child.waitFor((l) => l.startsWith('@@ '), 90_000);
    const msg = JSON.parse(line.slice(3)) as { ev: string; message?: string } & T;
    if (msg.ev === 'error') throw new Error(`${label}: ${msg.message}`);
    await child.waitExit(10_000);
    return msg;
  } finally {
    await child.dispose();
  }
}

export default async function run(ctx: BenchContext): Promise<string> {
  const baselineDir = process.env.COALESCE_BENCH_BASELINE;
  const baseCommit = baselineDir ? execFileSync('git', ['-C', baselineDir, 'rev-parse', '--short=7', 'HEAD']).toString().trim() : undefined;
  const repeats = ctx.quick ? 3 : 11;
  const contenders: { id: string; name: string; harness: 'harness-closure' | 'harness-slot' }[] = [
    { id: 'dogpile', name: 'dogpile-guard, in process (`createCache()`)', harness: 'harness-closure' },
    { id: 'dogpile-redis', name: 'dogpile-guard on Redis (`createCache({ redis })`)', harness: 'harness-closure' },
    ...(baseCommit
      ? [
          { id: 'dogpile@base', name: `dogpile-guard@${baseCommit}, in process`, harness: 'harness-closure' as const },
          { id: 'dogpile-redis@base', name: `dogpile-guard@${baseCommit} on Redis`, harness: 'harness-closure' as const },
        ]
      : []),
    { id: 'acd', name: 'async-cache-dedupe (`createCache().define`, memory)', harness: 'harness-slot' },
    { id: 'bento', name: 'bentocache (memory tier, `getOrSet`)', harness: 'harness-closure' },
    { id: 'bare', name: 'bare `gate.then(v => v)` per caller', harness: 'harness-slot' },
  ];
  const references = [
    { id: 'harness-closure', name: 'harness: a loader closure + an array slot per caller' },
    { id: 'harness-slot', name: 'harness: an array slot per caller' },
  ];
  const builds = [build(root, 'main'), ...(baselineDir ? [build(baselineDir, 'baseline')] : [])];
  const redis = await startRedis();
  const coalesce = new Map<string, CoalesceResult>();
  let hits: HitsResult | undefined;
  try {
    for (const { id } of [...contenders, ...references]) {
      coalesce.set(id, await runWorker<CoalesceResult>(id, ['coalesce', id, String(CALLERS), String(repeats), redis.url, ...builds]));
      ctx.log(`${id}: ${median(coalesce.get(id)!.bytes).toFixed(0)} B per caller`);
    }
    const rounds = ctx.quick ? 4 : 20;
    hits = await runWorker<HitsResult>('hits', ['hits', '2000', '5000', String(rounds), redis.url, ...builds]);
    ctx.log('hits: done');
  } finally {
    await redis.stop();
  }

  const out: string[] = [];
  out.push('## Coalesced callers and Redis hits (`bench/coalesce.bench.ts`)');
  out.push('');
  out.push(
    `${CALLERS.toLocaleString('en')} callers of one cold key whose loader waits on a gate, each contender in a fresh Node process started with \`--expose-gc\` ` +
      `(after a warm-up of five rounds of as many callers), ${repeats} rounds each on a new key, median [min–max]. ` +
      'Heap: `used_heap_size` after two full collections before the calls and two after them (once the leader\'s loader runs), ' +
      'before the gate opens, divided by the number of callers. "Net" subtracts what the harness itself holds per caller, measured alone: ' +
      'the loader closure it passes and the array slot of the result for the callers that take a loader, the slot alone for the others. ' +
      'Answered: from opening the gate to the last caller\'s `.then`; the bare fan-out (N `gate.then(v => v)`, timed the same way) runs in the same process, ' +
      'alternating with the contender round by round; the ratio is the median of the per-round ratios.' +
      ' dogpile-guard runs as built for the package (`src/index.ts` bundled by esbuild, the bundler under tsup)' +
      (baseCommit ? `; \`@${baseCommit}\`: that commit's sources built the same way (COALESCE_BENCH_BASELINE).` : '.'),
  );
  out.push('');
  out.push('| contender | heap per caller, gross (B) | net of the harness (B) | answered after the gate opens (ms) | bare fan-out, same process (ms) | ratio |');
  out.push('|---|---|---|---|---|---|');
  for (const c of contenders) {
    const r = coalesce.get(c.id)!;
    const harness = median(coalesce.get(c.harness)!.bytes);
    const ratio = median(r.ms.map((ms, i) => ms / r.bareMs[i]!));
    out.push(
      `| ${c.name} | ${summary(r.bytes, 0)} | ${(median(r.bytes) - harness).toFixed(0)} | ${summary(r.ms, 2)} | ${summary(r.bareMs, 2)} | ${ratio.toFixed(2)}× |`,
    );
  }
  for (const ref of references) out.push(`| ${ref.name} | ${summary(coalesce.get(ref.id)!.bytes, 0)} | — | — | — | — |`);
  out.push('');
  out.push(
    'async-cache-dedupe hands every caller of a key the same promise, so a caller costs it the slot where the harness keeps that promise; ' +
      'the dogpile-guard and bentocache callers each pass their own loader and get their own promise. On Redis, "answered" includes the leader\'s write to Redis before the waiters are answered.',
  );
  if (hits) {
    const ids = ['raw', 'dogpile', 'dogpile-tsx', ...(baseCommit ? ['dogpile@base'] : [])];
    const names: Record<string, string> = {
      raw: 'bare ioredis `getBuffer` + `v8.deserialize`',
      dogpile: 'dogpile-guard `getOrCompute` (Redis, no L1)',
      'dogpile-tsx': 'the same, its TypeScript sources run by tsx',
      'dogpile@base': `dogpile-guard@${baseCommit} \`getOrCompute\``,
    };
    out.push('');
    out.push('### Redis hits (no L1) against a bare read of the same bytes');
    out.push('');
    out.push(
      `One process, one ioredis client, the value (${hits.bytes} bytes as stored) written by dogpile-guard; the bare read fetches the same key and decodes it past the header. ` +
        `Thousands of reads per second, median [min–max] over ${hits.rates.seq.raw!.length} slices per contender (2 000 reads per slice one at a time, 5 000 with 100 in flight on 100 distinct keys), ` +
        'the contenders interleaved in an order rotated every round; the ratio is the median of the per-round ratios to the bare read.',
    );
    out.push('');
    out.push('| reader | one at a time (k/s) | ratio | 100 in flight, distinct keys (k/s) | ratio |');
    out.push('|---|---|---|---|---|');
    for (const id of ids) {
      const cells = (['seq', 'inflight'] as const).map((mode) => {
        const mine = hits!.rates[mode][id]!;
        const raw = hits!.rates[mode].raw!;
        const ratios = mine.map((v, i) => v / raw[i]!);
        return `${summary(mine.map((v) => v / 1000), 1)} | ${id === 'raw' ? '1' : `${median(ratios).toFixed(2)}×`}`;
      });
      out.push(`| ${names[id]} | ${cells.join(' | ')} |`);
    }
  }
  return out.join('\n');
}
