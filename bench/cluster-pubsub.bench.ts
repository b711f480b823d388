/**
 * Cluster bus traffic per stampede: sharded pub/sub (SPUBLISH / SSUBSCRIBE, what the library
 * uses on a Redis ≥ 7 cluster) against PUBLISH / SUBSCRIBE (its fallback on servers without
 * sharded pub/sub). Two throwaway clusters of 3 masters with one replica each, the same Redis
 * build; on the second one SPUBLISH and SSUBSCRIBE are renamed away, so the library detects
 * no sharded pub/sub and falls back to PUBLISH: the workload is the same, only the way
 * wake-ups travel differs.
 *
 * A stampede: 4 caches (each with its own Cluster client, so its own connections and its own
 * subscriber) × 25 concurrent calls on one cold key, a 20 ms loader, a 1 KiB value. Between
 * the CLUSTER INFO of every node before and after a series of stampedes, the cluster bus
 * counters (`cluster_stats_messages_*_sent`, summed over the nodes) give the messages per
 * stampede: `publish` (PUBLISH, sent by the receiving node to every other node) and
 * `publishshard` (SPUBLISH, sent only to the replicas of the channel's shard), and all
 * messages (the ping/pong heartbeat included, which runs whatever the load).
 */
import { createCache, type DogpileCache } from '../src/index.js';
import { RedisTestCluster } from '../tools/redis-server.js';
import { summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const CACHES = 4;
const CALLS_PER_CACHE = 25;
const LOADER_MS = 20;
const VALUE = 'x'.repeat(1024);

type Mode = 'SPUBLISH (sharded)' | 'PUBLISH (fallback)';

interface RunResult {
  mode: Mode;
  stampedes: number;
  loaderRuns: number;
  publishPerStampede: number;
  publishShardPerStampede: number;
  allPerStampede: number;
}

async function busCounters(cluster: RedisTestCluster): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const node of cluster.nodes) {
    const info = String(await node.command('CLUSTER', 'INFO'));
    for (const m of info.matchAll(/cluster_stats_messages_([a-z-]+)_sent:(\d+)/g)) totals[m[1]!] = (totals[m[1]!] ?? 0) + Number(m[2]);
    const all = /cluster_stats_messages_sent:(\d+)/.exec(info);
    totals.all = (totals.all ?? 0) + Number(all?.[1] ?? 0);
  }
  return totals;
}

async function runOnce(mode: Mode, cluster: RedisTestCluster, stampedes: number, run: number): Promise<RunResult> {
  const caches: DogpileCache[] = Array.from({ length: CACHES }, () => createCache({ redis: cluster.client(), l1: false }));
  let loaderRuns = 0;
  const loader = async () => {
    loaderRuns++;
    await new Promise((r) => setTimeout(r, LOADER_MS));
    return VALUE;
  };
  try {
    // Warm up: the pub/sub mode is detected and the subscriber connections opened.
    await Promise.all(caches.map((c) => c.getOrCompute(`warm-${run}`, loader, 60_000)));
    loaderRuns = 0;
    const before = await busCounters(cluster);
    for (let s = 0; s < stampedes; s++) {
      const key = `stampede-${run}-${s}`;
      await Promise.all(caches.flatMap((c) => Array.from({ length: CALLS_PER_CACHE }, () => c.getOrCompute(key, loader, 60_000))));
    }
    const after = await busCounters(cluster);
    const per = (name: string) => ((after[name] ?? 0) - (before[name] ?? 0)) / stampedes;
    return {
      mode,
      stampedes,
      loaderRuns,
      publishPerStampede: per('publish'),
      publishShardPerStampede: per('publishshard'),
      allPerStampede: per('all'),
    };
  } finally {
    await Promise.all(caches.map((c) => c.close()));
  }
}

export default async function clusterPubSubBench(ctx: BenchContext): Promise<string> {
  const repeats = ctx.quick ? 1 : 3;
  const stampedes = ctx.quick ? 20 : 100;
  const sharded = new RedisTestCluster(3, { replicas: 1 });
  const fallback = new RedisTestCluster(3, { replicas: 1, args: ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', ''] });
  const results: RunResult[] = [];
  try {
    await sharded.start();
    await fallback.start();
    for (let run = 0; run < repeats; run++) {
      const order: [Mode, RedisTestCluster][] = [
        ['SPUBLISH (sharded)', sharded],
        ['PUBLISH (fallback)', fallback],
      ];
      if (run % 2 === 1) order.reverse();
      for (const [mode, cluster] of order) {
        const r = await runOnce(mode, cluster, stampedes, run);
        results.push(r);
        ctx.log(
          `${mode} run ${run + 1}: ${r.loaderRuns} loader runs for ${r.stampedes} stampedes; per stampede ${r.publishPerStampede.toFixed(2)} publish + ` +
            `${r.publishShardPerStampede.toFixed(2)} publishshard bus messages, ${r.allPerStampede.toFixed(1)} bus messages in all`,
        );
      }
    }
  } finally {
    await sharded.stop();
    await fallback.stop();
  }
  const of = (mode: Mode) => results.filter((r) => r.mode === mode);
  const rows = (['SPUBLISH (sharded)', 'PUBLISH (fallback)'] as Mode[]).map((mode) => {
    const rs = of(mode);
    return (
      `| ${mode} | ${summary(rs.map((r) => r.loaderRuns / r.stampedes), 2)} | ${summary(rs.map((r) => r.publishPerStampede), 2)} | ` +
      `${summary(rs.map((r) => r.publishShardPerStampede), 2)} | ${summary(rs.map((r) => r.allPerStampede), 1)} |`
    );
  });
  return [
    '## Cluster bus traffic per stampede: SPUBLISH vs PUBLISH',
    '',
    `3 masters + 3 replicas (one per master), ${CACHES} caches (own Cluster client each) × ${CALLS_PER_CACHE} concurrent calls per stampede on a cold key, ` +
      `${LOADER_MS} ms loader, 1 KiB value (inlined in the wake-up message); ${stampedes} stampedes per run, ${repeats} run(s). ` +
      'Cluster bus messages sent, summed over the 6 nodes (CLUSTER INFO before and after), per stampede. The fallback cluster is the same build with SPUBLISH/SSUBSCRIBE renamed away.',
    '',
    '| wake-ups by | loader runs / stampede | `publish` messages | `publishshard` messages | all bus messages (heartbeats included) |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
