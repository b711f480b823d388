/**
 * The hit path with and without a subscriber on the `dogpile-guard:*` diagnostics channels
 * (issue 14): sequential `getOrCompute` hits of a warm key from the embedded store, from L1
 * and from Redis, while nobody listens, while a no-op subscriber listens, and while the
 * `dogpile-guard/prometheus` collectors record. The three states are interleaved slice by
 * slice (subscribing and unsubscribing between slices), in an order rotated every round, so a
 * drift of the shared machine does not favour one of them.
 *
 *   npm run bench -- diagnostics        (writes bench/.out/diagnostics.md)
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { Registry } from 'prom-client';
import { createCache, type DogpileCache } from '../src/index.js';
import { registerDogpileMetrics } from '../src/prometheus/index.js';
import { startRedis } from '../tools/redis-server.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

type State = 'none' | 'noop' | 'prometheus';
const STATES: { id: State; name: string }[] = [
  { id: 'none', name: 'no subscriber' },
  { id: 'noop', name: 'no-op subscriber on `dogpile-guard:getOrCompute`' },
  { id: 'prometheus', name: '`registerDogpileMetrics()` (prom-client)' },
];

/** Subscribes what `state` stands for; returns the function that unsubscribes. */
function enter(state: State): () => void {
  if (state === 'none') return () => {};
  if (state === 'noop') {
    const channel = tracingChannel('dogpile-guard:getOrCompute');
    const noop = () => {};
    const subscribers = { start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop };
    channel.subscribe(subscribers);
    return () => channel.unsubscribe(subscribers);
  }
  const metrics = registerDogpileMetrics({ registry: new Registry() });
  return () => metrics.dispose();
}

export default async function run(ctx: BenchContext): Promise<string> {
  const redis = await startRedis();
  const client = redis.client();
  const caches: { id: string; name: string; cache: DogpileCache }[] = [
    { id: 'embedded', name: 'embedded store (no Redis)', cache: createCache() },
    { id: 'l1', name: 'Redis + `l1: true` (L1 hit)', cache: createCache({ redis: client, l1: true }) },
    { id: 'redis', name: 'Redis (plain GET hit)', cache: createCache({ redis: client }) },
  ];
  const value = { id: 42, name: 'product', tags: ['a', 'b', 'c'] };
  const load = () => value;
  const rounds = ctx.quick ? 3 : 15;
  const sliceMs = ctx.quick ? 100 : 300;
  const results = new Map<string, number[]>();
  try {
    for (const { cache } of caches) await cache.getOrCompute('warm', load, 600_000);
    for (const { id, cache } of caches) {
      // warm-up of every state
      for (const { id: state } of STATES) {
        const leave = enter(state);
        for (let i = 0; i < 20_000; i++) await cache.getOrCompute('warm', load, 600_000);
        leave();
      }
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < STATES.length; i++) {
          const state = STATES[(i + r) % STATES.length]!.id;
          const leave = enter(state);
          let ops = 0;
          const t0 = performance.now();
          while (performance.now() - t0 < sliceMs) {
            for (let k = 0; k < 1000; k++) await cache.getOrCompute('warm', load, 600_000);
            ops += 1000;
          }
          const ms = performance.now() - t0;
          leave();
          const key = `${id}:${state}`;
          results.set(key, [...(results.get(key) ?? []), (ops / ms) * 1000]);
        }
      }
      ctx.log(`${id}: done`);
    }
  } finally {
    for (const { cache } of caches) await cache.close();
    client.disconnect();
    await redis.stop();
  }

  const kops = (values: number[]) => summary(values.map((v) => v / 1000), 0);
  const out: string[] = [];
  out.push('## Hit path with and without a diagnostics subscriber (`bench/diagnostics.bench.ts`)');
  out.push('');
  out.push(
    `Sequential \`getOrCompute\` hits of one warm key in one process, thousands of calls per second (median [min–max] over ${rounds} interleaved slices of ${sliceMs} ms each); ` +
      'the ratio is against "no subscriber" in the same run. With no subscriber the hit path is the one every other benchmark measures: ' +
      'the only addition is one `hasSubscribers` read; with a subscriber, a call goes through `resolve()` and the tracing channel.',
  );
  out.push('');
  out.push(`| hit from | ${STATES.map((s) => s.name).join(' | ')} |`);
  out.push(`|---|${STATES.map(() => '---').join('|')}|`);
  for (const { id, name } of caches) {
    const base = median(results.get(`${id}:none`) ?? []);
    const cells = STATES.map(({ id: state }) => {
      const values = results.get(`${id}:${state}`) ?? [];
      return state === 'none' ? kops(values) : `${kops(values)} (${(median(values) / base).toFixed(2)}×)`;
    });
    out.push(`| ${name} | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}
