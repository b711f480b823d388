/**
 * A short, bounded cache workload on a real Redis that makes every Prometheus series of
 * `dogpile-guard/prometheus` move: stampedes (one miss, the rest coalesced, waits), hits from
 * the L1 and from Redis, stale answers with background refreshes, a failing loader served
 * fail-safe, and a frozen Redis (command timeouts, Redis errors, loaders run locally) that
 * comes back. Used by test/grafana.test.ts and tools/grafana-panels.ts.
 */
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId, sleep } from './basics.js';
import type { RedisServer } from './redis-server.js';

export interface WorkloadOptions {
  /** A started server; it is frozen (SIGSTOP) for about `freezeMs` (the round then in progress ends first), then thawed. */
  server: RedisServer;
  /** Rounds of the mixed traffic before and after the freeze (each round is about `tick` ms). */
  rounds?: number;
  /** How long Redis stays frozen. */
  freezeMs?: number;
  /** Pause between two rounds. */
  tick?: number;
  /** Called after every round, with its phase. */
  onRound?: (phase: 'traffic' | 'frozen' | 'recovered') => void | Promise<void>;
  /** Called when Redis is frozen (true) and thawed (false). */
  onFreeze?: (frozen: boolean) => void;
}

const LOADER_MS = 30;
const slow = <T>(value: T, ms = LOADER_MS) => sleep(ms).then(() => value);

/** Runs the workload; closes the cache it made, leaves the server running (and thawed). */
export async function runWorkload(options: WorkloadOptions): Promise<void> {
  const { server, rounds = 6, freezeMs = 1_000, tick = 100 } = options;
  const cache = createCache({
    redis: server.client({ maxRetriesPerRequest: 1 }),
    prefix: freshId('workload'),
    l1: { ttl: '200ms' },
    commandTimeout: 150,
    backendCooldown: 300,
  });
  let round = 0;
  let failing = false;
  const mixed = async () => {
    round++;
    // A stampede on a fresh key: one loader run, 11 callers wait for it.
    const herd = `herd:${round}`;
    await Promise.all(Array.from({ length: 12 }, () => cache.getOrCompute(herd, () => slow(round), '10s')));
    // Hits: from the L1 of this process, and from Redis once the L1 copy has aged.
    for (let i = 0; i < 6; i++) await cache.getOrCompute('hot', () => slow('hot'), '1m');
    // A value past its ttl inside its stale window: answered stale, refreshed in the background.
    // Every other round that refresh fails (the stale value stays).
    const refreshFails = failing;
    await cache
      .getOrCompute('swr', () => (refreshFails ? Promise.reject(new Error('database down')) : slow(round)), { ttl: 50, staleWhileRevalidate: '1m' })
      .catch(() => undefined); // no value yet to serve instead: the call fails
    // A value whose loader now fails, inside staleIfError: answered with the old value (fail-safe).
    await cache
      .getOrCompute('safe', () => (failing ? Promise.reject(new Error('database down')) : slow(round)), { ttl: 50, staleIfError: '1m' })
      .catch(() => undefined);
    failing = round % 2 === 1;
  };
  try {
    for (let i = 0; i < rounds; i++) {
      await mixed();
      await options.onRound?.('traffic');
      await sleep(tick);
    }
    server.freeze();
    options.onFreeze?.(true);
    try {
      // Rounds until freezeMs have passed (monotonic clock), at least one.
      const until = performance.now() + freezeMs;
      do {
        await mixed();
        await options.onRound?.('frozen');
        await sleep(tick);
      } while (performance.now() < until);
    } finally {
      server.thaw();
      options.onFreeze?.(false);
    }
    for (let i = 0; i < rounds; i++) {
      await mixed();
      await options.onRound?.('recovered');
      await sleep(tick);
    }
  } finally {
    await closeQuietly(cache);
  }
}

async function closeQuietly(cache: DogpileCache): Promise<void> {
  await cache.close().catch(() => undefined);
}
