/**
 * A run's configuration and fault schedule, both derived from its seed alone (so
 * `--seed S` replays them), plus the worker count and run length given on the command line.
 */
import { Prng } from './prng.js';
import type { RunConfig, Runtime, ScheduledFault, Topology } from './history.js';

export interface RunShape {
  workers: number;
  durationMs: number;
  /** The cache's Redis for every history (`--topology`); else drawn from each seed. */
  topology?: Topology;
  /** Worker i runs under `runtimes[i % length]` (`--runtimes`); else every worker is Node. */
  runtimes?: Runtime[];
}

export const DEFAULT_WORKERS = 3;
export const DEFAULT_RUN_MS = 20_000;

/** The share of seeds whose cache Redis is a cluster, when `--topology` does not say. */
export const CLUSTER_SHARE = 0.25;

/**
 * The cache's Redis of a history: forced by the shape, else drawn from the seed (on a PRNG of
 * its own, so the configuration and the schedule of a single-server seed are what they were
 * before clusters existed).
 */
export function topologyOf(seed: number, shape: RunShape): Topology {
  return shape.topology ?? (new Prng(seed, 5).chance(CLUSTER_SHARE) ? 'cluster' : 'single');
}

/** Each worker's runtime, by index. */
export function runtimesOf(shape: RunShape): Runtime[] {
  const given = shape.runtimes && shape.runtimes.length > 0 ? shape.runtimes : ['node' as const];
  return Array.from({ length: shape.workers }, (_, i) => given[i % given.length]!);
}

/** No fault is scheduled in the first and last this-many ms of a run: it starts warm and ends quiet. */
export const QUIET_EDGE_MS = 2_500;

export function runConfig(seed: number, shape: RunShape): RunConfig {
  const rng = new Prng(seed, 1);
  const keyCount = rng.int(3, 6);
  const keys = Array.from({ length: keyCount }, (_, i) => `k${i}`);
  const tags = Object.fromEntries(keys.map((k, i) => [k, `t${i % 2}`]));
  const stale = rng.pick(['none', 'swr', 'sie', 'both'] as const);
  const lockTtl = rng.int(1500, 3000);
  const commandTimeout = rng.int(500, 1000);
  const loaderMs = rng.int(5, 60);
  const slowLoaderMs = rng.int(1500, 3500);
  const config: RunConfig = {
    seed,
    workers: shape.workers,
    loops: 3,
    durationMs: shape.durationMs,
    keys,
    tags,
    lockNames: ['m0', 'm1'],
    ttl: rng.pick([400, 800, 1500, 3000, 6000]),
    l1: rng.chance(0.5),
    staleWhileRevalidate: stale === 'swr' || stale === 'both' ? rng.int(500, 3000) : 0,
    staleIfError: stale === 'sie' || stale === 'both' ? rng.int(1000, 5000) : 0,
    lockTtl,
    waitTimeout: rng.int(2000, 4000),
    commandTimeout,
    backendCooldown: rng.int(300, 1000),
    slowLoaderMs,
    loaderMs,
    lockHoldMs: rng.int(20, 200),
    lockAcquireTimeout: rng.int(1000, 3000),
    lockTtlLock: rng.int(2000, 4000),
  };
  if (rng.chance(0.4)) config.hardTimeout = rng.int(800, 2500);
  if (rng.chance(0.4)) config.clockShift = { worker: rng.int(0, shape.workers - 1), ms: rng.pick([-1, 1]) * rng.int(1000, 8000) };
  config.topology = topologyOf(seed, shape);
  config.runtimes = runtimesOf(shape);
  return config;
}

const FAULT_WEIGHTS = {
  pause: 3,
  pubsubKill: 3,
  freeze: 2,
  restart: 2,
  killWorker: 2,
  slowLoader: 2,
  failLoader: 2,
} as const;

/**
 * On a cluster: no `restart` (a master killed is `killMaster`, which its replica replaces),
 * and the two failovers. `pause` and `freeze` hit one shard's master; a freeze longer than
 * cluster-node-timeout ends in an automatic failover of its own.
 */
const CLUSTER_FAULT_WEIGHTS = {
  pause: 2,
  pubsubKill: 2,
  freeze: 2,
  failover: 3,
  killMaster: 3,
  killWorker: 2,
  slowLoader: 2,
  failLoader: 2,
} as const;

/** Masters of the cache's cluster (each with one replica). */
export const CLUSTER_MASTERS = 3;

/** The faults of a run: kinds, moments (ms after the start), lengths and target workers (and shards, on a cluster). */
export function faultSchedule(seed: number, shape: RunShape): ScheduledFault[] {
  const rng = new Prng(seed, 2);
  const cluster = topologyOf(seed, shape) === 'cluster';
  const schedule: ScheduledFault[] = [];
  let at = QUIET_EDGE_MS + rng.int(0, 1500);
  for (;;) {
    // A cluster history's first fault is a failover of one of the two kinds: every cluster history has one.
    const kind: ScheduledFault['kind'] = !cluster ? rng.weighted(FAULT_WEIGHTS) : schedule.length === 0 ? rng.pick(['failover', 'killMaster'] as const) : rng.weighted(CLUSTER_FAULT_WEIGHTS);
    const durationMs =
      kind === 'pause' || kind === 'freeze' ? rng.int(200, 1500)
      : kind === 'restart' ? rng.int(0, 600)
      : kind === 'slowLoader' || kind === 'failLoader' ? rng.int(1000, 3000)
      : 0;
    if (at + durationMs > shape.durationMs - QUIET_EDGE_MS) break;
    const fault: ScheduledFault = { at, kind, durationMs, worker: rng.int(0, shape.workers - 1) };
    if (cluster) fault.shard = rng.int(0, CLUSTER_MASTERS - 1);
    schedule.push(fault);
    // A failover takes a few seconds to settle (promotion, the killed node back as a replica).
    at += durationMs + rng.int(1200, 4000) + (kind === 'failover' || kind === 'killMaster' ? 1500 : 0);
  }
  return schedule;
}
