/**
 * What a run records: every worker's operations (invocation and completion), loader runs,
 * lock holdings, backend errors, and the nemesis's faults, all on one clock.
 *
 * The clock: `performance.timeOrigin + performance.now()`, read by the process where the event
 * happens (see `now()`). Every process of the run lives on one machine, so each one's time
 * origin comes from the same system clock and its monotonic offset does not drift measurably
 * over a run. Workers stamp their own events instead of the runner stamping them on receipt:
 * a line can sit in a pipe while the runner is busy, which would move a read's invocation later
 * and make a fresh read look stale. A worker with a shifted wall clock only has `Date.now`
 * shifted (the library's view); this clock is not affected.
 */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export type FaultKind = 'pause' | 'pubsubKill' | 'freeze' | 'restart' | 'failover' | 'killMaster' | 'killWorker' | 'slowLoader' | 'failLoader' | 'clockShift';

export const FAULT_KINDS: readonly FaultKind[] = ['pause', 'pubsubKill', 'freeze', 'restart', 'failover', 'killMaster', 'killWorker', 'slowLoader', 'failLoader', 'clockShift'];

/** The cache's Redis: one server, or a Redis Cluster of 3 masters with one replica each. */
export type Topology = 'single' | 'cluster';

/** What runs a worker process: this Node (with tsx), Bun or Deno (from the `bun` and `deno` npm packages). */
export type Runtime = 'node' | 'bun' | 'deno';

export const RUNTIMES: readonly Runtime[] = ['node', 'bun', 'deno'];

/** A fault as it happened: `start`/`end` on the run's clock (equal for instant faults). */
export interface Fault {
  kind: FaultKind;
  start: number;
  end: number;
  /** The worker concerned (killWorker, slowLoader, failLoader, clockShift). */
  worker?: number;
  /** clockShift: the worker's wall-clock offset in ms. */
  shiftMs?: number;
  /** Cluster faults: the shard (0-2, by slot range) and the ports of the nodes concerned. */
  shard?: number;
  /** The master attacked (failover: the one demoted; killMaster: the one killed). */
  master?: number;
  /** The replica that took over (failover, killMaster, and a freeze that outlasted cluster-node-timeout). */
  promoted?: number;
  /** killMaster: whether the killed node came back as a replica of the new master. */
  rejoined?: boolean;
}

export interface ErrorInfo {
  name: string;
  code?: string;
  message: string;
}

/** The value every loader returns and every `set` writes: which key, which database version, who made it. */
export interface ChaosValue {
  key: string;
  version: number;
  src: string;
}

export type OpKind = 'read' | 'get' | 'set' | 'delete' | 'invalidate' | 'lock';

interface OpBase {
  /** Unique: `<worker>.<incarnation>:<n>`. */
  id: string;
  worker: number;
  kind: OpKind;
  /** Invocation (before the database bump, for writes). */
  inv: number;
  /** Completion; absent for an operation still running when its worker died. */
  end?: number;
  ok?: boolean;
  error?: ErrorInfo;
}

export interface ReadOp extends OpBase {
  kind: 'read' | 'get';
  key: string;
  value?: unknown;
  status?: string;
  staleReason?: string;
}

export interface WriteOp extends OpBase {
  kind: 'set' | 'delete' | 'invalidate';
  /** The versions the database holds after this write's bump, per key it concerns. */
  versions: Record<string, number>;
  tag?: string;
  /** invalidate: with `{ stale: true }`. */
  stale?: boolean;
  /** When the cache call started (after the database bump). */
  cacheInv?: number;
}

export interface LockOp extends OpBase {
  kind: 'lock';
  name: string;
  token?: number;
  /** When `acquire()` resolved (= end of the acquisition). */
  acquiredAt?: number;
  /** When `release()` was called. */
  releaseInv?: number;
  releaseEnd?: number;
  released?: boolean;
  /** When the lock's signal aborted (lost) while held. */
  lostAt?: number;
}

export type Op = ReadOp | WriteOp | LockOp;

export interface LoaderRun {
  run: string;
  worker: number;
  key: string;
  start: number;
  end?: number;
  ok?: boolean;
  version?: number;
  mode: 'normal' | 'slow' | 'fail';
}

/** An operation a worker still had running when it was told to stop and that did not end within its bound. */
export interface HungOp {
  id: string;
  worker: number;
  kind: OpKind;
  inv: number;
  key?: string;
}

export interface RunConfig {
  seed: number;
  workers: number;
  /** Concurrent operation loops per worker. */
  loops: number;
  durationMs: number;
  keys: string[];
  /** Tag of each key. */
  tags: Record<string, string>;
  lockNames: string[];
  ttl: number;
  l1: boolean;
  staleWhileRevalidate: number;
  staleIfError: number;
  lockTtl: number;
  waitTimeout: number;
  commandTimeout: number;
  backendCooldown: number;
  hardTimeout?: number;
  /** How long a loader sleeps while a slowLoader fault is on it. */
  slowLoaderMs: number;
  /** Longest normal loader sleep. */
  loaderMs: number;
  lockHoldMs: number;
  lockAcquireTimeout: number;
  lockTtlLock: number;
  /** Worker whose `Date.now` is shifted for the whole run, and by how much. */
  clockShift?: { worker: number; ms: number };
  /** The cache's Redis (absent in histories written before clusters: a single server). */
  topology?: Topology;
  /** Each worker's runtime, by index (absent: all Node). */
  runtimes?: Runtime[];
}

export interface ScheduledFault {
  at: number;
  kind: Exclude<FaultKind, 'clockShift'>;
  durationMs: number;
  worker: number;
  /** On a cluster: the shard whose master a Redis fault hits (0-2, by slot range). */
  shard?: number;
}

export interface History {
  seed: number;
  config: RunConfig;
  schedule: ScheduledFault[];
  start: number;
  end: number;
  ops: Op[];
  runs: LoaderRun[];
  hung: HungOp[];
  /** Times (per worker) at which the cache reported a backendError. */
  backendErrors: { worker: number; at: number }[];
  faults: Fault[];
  /** The database's versions at the end of the run (no read may return a version above its key's). */
  finalVersions: Record<string, number>;
  /** Worker processes that exited on their own account (a crash), with their stderr tail. */
  crashes: { worker: number; at: number; detail: string }[];
}
