/**
 * A run's configuration and fault schedule, both derived from its seed alone (so
 * `--seed S` replays them), plus the worker count and run length given on the command line.
 */
import { Prng } from './prng.js';
import type { RunConfig, ScheduledFault } from './history.js';

export interface RunShape {
  workers: number;
  durationMs: number;
}

export const DEFAULT_WORKERS = 3;
export const DEFAULT_RUN_MS = 20_000;

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

/** The faults of a run: kinds, moments (ms after the start), lengths and target workers. */
export function faultSchedule(seed: number, shape: RunShape): ScheduledFault[] {
  const rng = new Prng(seed, 2);
  const schedule: ScheduledFault[] = [];
  let at = QUIET_EDGE_MS + rng.int(0, 1500);
  for (;;) {
    const kind = rng.weighted(FAULT_WEIGHTS);
    const durationMs =
      kind === 'pause' || kind === 'freeze' ? rng.int(200, 1500)
      : kind === 'restart' ? rng.int(0, 600)
      : kind === 'slowLoader' || kind === 'failLoader' ? rng.int(1000, 3000)
      : 0;
    if (at + durationMs > shape.durationMs - QUIET_EDGE_MS) break;
    schedule.push({ at, kind, durationMs, worker: rng.int(0, shape.workers - 1) });
    at += durationMs + rng.int(1200, 4000);
  }
  return schedule;
}
