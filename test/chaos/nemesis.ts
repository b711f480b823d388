/**
 * The nemesis: carries out a run's fault schedule against the cache's Redis (a server or a
 * cluster, see cache-redis.ts) and the worker processes, and records each fault as it
 * happened (on the run's clock).
 */
import { sleep } from '../../tools/basics.js';
import type { CacheRedis, FaultDetail } from './cache-redis.js';
import { now, type Fault, type ScheduledFault } from './history.js';

/** What the nemesis needs from the run: its workers, by index. */
export interface WorkerPool {
  /** Indexes of the workers running now. */
  live(): number[];
  /** Indexes of the workers with a loader run in progress now. */
  inLoader(): number[];
  /** SIGKILLs worker `index` and starts its next incarnation. */
  killAndRespawn(index: number): Promise<void>;
  /** Switches worker `index`'s loaders to `mode`. */
  loaderMode(index: number, mode: 'normal' | 'slow' | 'fail'): void;
}

/** How long the nemesis waits for a worker to be inside a loader before killing one anyway. */
const MID_LOADER_WAIT_MS = 1500;

export async function runNemesis(schedule: readonly ScheduledFault[], start: number, redis: CacheRedis, pool: WorkerPool, faults: Fault[]): Promise<void> {
  for (const f of schedule) {
    const wait = start + f.at - now();
    if (wait > 0) await sleep(wait);
    const begin = now();
    switch (f.kind) {
      case 'pause': {
        const detail = await redis.pause(f.durationMs, f.shard ?? 0);
        faults.push({ kind: f.kind, start: begin, end: now(), ...detail });
        break;
      }
      case 'pubsubKill':
        await redis.killSubscribers();
        faults.push({ kind: f.kind, start: begin, end: now() });
        break;
      case 'freeze': {
        const detail = await redis.freeze(f.durationMs, f.shard ?? 0);
        faults.push({ kind: f.kind, start: begin, end: now(), ...detail });
        break;
      }
      case 'restart':
        await redis.restart(f.durationMs);
        faults.push({ kind: f.kind, start: begin, end: now() });
        break;
      case 'failover':
      case 'killMaster': {
        // Recorded from the command (or the kill) to a healthy cluster again: the killed
        // master back as a replica in sync, for killMaster.
        const detail = await (f.kind === 'failover' ? redis.failover(f.shard ?? 0) : redis.killMaster(f.shard ?? 0)).catch((): FaultDetail => ({ shard: f.shard }));
        faults.push({ kind: f.kind, start: begin, end: now(), ...detail });
        break;
      }
      case 'killWorker': {
        // A worker killed while one of its loaders runs (a leader dying mid-loader), if one
        // gets there within MID_LOADER_WAIT_MS.
        let target: number | undefined;
        const deadline = now() + MID_LOADER_WAIT_MS;
        while (target === undefined && now() < deadline) {
          const busy = pool.inLoader();
          target = busy.includes(f.worker) ? f.worker : busy[0];
          if (target === undefined) await sleep(10);
        }
        target ??= pool.live().includes(f.worker) ? f.worker : pool.live()[0];
        if (target === undefined) break;
        const at = now();
        const respawned = pool.killAndRespawn(target);
        faults.push({ kind: f.kind, start: at, end: at, worker: target });
        await respawned;
        break;
      }
      case 'slowLoader':
      case 'failLoader': {
        const mode = f.kind === 'slowLoader' ? 'slow' : 'fail';
        pool.loaderMode(f.worker, mode);
        await sleep(f.durationMs);
        pool.loaderMode(f.worker, 'normal');
        faults.push({ kind: f.kind, start: begin, end: now(), worker: f.worker });
        break;
      }
    }
  }
}
