/**
 * One worker process of a chaos run:
 *
 *   node [--import clock-shift.mjs] --import tsx test/chaos/worker.ts '<json>'
 *   bun [--preload clock-shift.mjs] test/chaos/worker.ts '<json>'
 *   deno run -A --sloppy-imports [--preload clock-shift.mjs] test/chaos/worker.ts '<json>'
 *
 * It runs `config.loops` loops of random operations (each loop's PRNG seeded from the run's
 * seed, the worker, its incarnation and the loop, so a replay issues the same operations) on a
 * cache and `RedisLock`s over the cache Redis (a server, or a cluster through the client's
 * cluster support), against a "database" on a second Redis: a hash
 * `db` holding each key's version. Every operation is reported twice as a JSON line: when it
 * begins (`op-begin`) and when it ends (`op`); loader runs, lock acquisitions and the cache's
 * `backendError` events are reported as they happen. Commands on stdin: `{ cmd: 'loader',
 * mode }` (slow or failing loaders from now on), `{ cmd: 'go' }` (start, when told to wait for
 * it) and `{ cmd: 'stop' }` (finish the operations
 * in flight, report those that outlive their bound, close, exit).
 */
import { createCache, RedisLock, type DogpileCache } from '../../src/index.js';
import { closeClient } from '../../src/redis/client.js';
import { IoRedis, libraryClient, libraryClusterClient } from '../../tools/test-client.js';
import { send, onCommands } from '../fixtures/child-io.js';
import { now, type ChaosValue, type ErrorInfo, type LockOp, type Op, type ReadOp, type RunConfig, type WriteOp } from './history.js';
import { opBound } from './bounds.js';
import { planOp, type PlannedOp } from './plan.js';
import { Prng } from './prng.js';

interface WorkerArgs {
  worker: number;
  incarnation: number;
  /** The cache's Redis: one server's URL, or a cluster's nodes. */
  cache: { url: string } | { nodes: { host: string; port: number }[] };
  dbUrl: string;
  config: RunConfig;
  /** Wait for `{ cmd: 'go' }` before the first operation (the run's first workers start together). */
  waitForGo: boolean;
}

export class InjectedLoaderError extends Error {
  override name = 'InjectedLoaderError';
}

const args = JSON.parse(process.argv[2]!) as WorkerArgs;
const { config, worker, incarnation } = args;
const label = `${worker}.${incarnation}`;
const redis = 'nodes' in args.cache ? await libraryClusterClient(args.cache.nodes) : await libraryClient(args.cache.url);
const db = new IoRedis.Redis(args.dbUrl);
db.on('error', () => {});
const cache: DogpileCache = createCache({
  redis,
  prefix: 'chaos',
  l1: config.l1 ? { max: 100, ttl: 60_000 } : false,
  lockTtl: config.lockTtl,
  waitTimeout: config.waitTimeout,
  commandTimeout: config.commandTimeout,
  backendCooldown: config.backendCooldown,
  staleWhileRevalidate: config.staleWhileRevalidate,
  staleIfError: config.staleIfError,
  ...(config.hardTimeout === undefined ? {} : { hardTimeout: config.hardTimeout }),
});
cache.on('backendError', () => send({ event: 'backend-error', worker, at: now() }));

let loaderMode: 'normal' | 'slow' | 'fail' = 'normal';
let stopping = false;
let opCount = 0;
let runCount = 0;
const inFlight = new Map<string, Op>();
const loaderRng = new Prng(config.seed, 4, worker, incarnation);

function errorInfo(err: unknown): ErrorInfo {
  const e = err as Error & { code?: string };
  return { name: e?.name ?? 'unknown', code: e?.code, message: String(e?.message ?? err).slice(0, 300) };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

async function loader({ key, signal }: { key: string; signal: AbortSignal }): Promise<ChaosValue> {
  const run = `${label}.r${++runCount}`;
  const mode = loaderMode;
  send({ event: 'load-start', run, worker, key, at: now(), mode });
  try {
    const version = Number((await db.hget('db', key)) ?? 0);
    await sleep(mode === 'slow' ? config.slowLoaderMs : loaderRng.int(0, config.loaderMs), signal);
    if (mode === 'fail') throw new InjectedLoaderError(`loader of ${key} failed on purpose (${run})`);
    send({ event: 'load-end', run, key, at: now(), ok: true, version });
    return { key, version, src: run };
  } catch (err) {
    send({ event: 'load-end', run, key, at: now(), ok: false, error: errorInfo(err) });
    throw err;
  }
}

function begin<T extends Op>(op: T): T {
  inFlight.set(op.id, op);
  send({ event: 'op-begin', op });
  return op;
}

function finish(op: Op, ok: boolean, err?: unknown): void {
  op.end = now();
  op.ok = ok;
  if (err !== undefined) op.error = errorInfo(err);
  inFlight.delete(op.id);
  send({ event: 'op', op });
}

async function read({ kind, key }: Extract<PlannedOp, { kind: 'read' | 'get' }>, id: string): Promise<void> {
  const op = begin<ReadOp>({ id, worker, kind, key, inv: now() });
  try {
    if (kind === 'read') {
      const result = await cache.resolve(key, loader, { ttl: config.ttl, tags: [config.tags[key]!] });
      op.value = result.value;
      op.status = result.status;
      if (result.staleReason !== undefined) op.staleReason = result.staleReason;
    } else {
      op.value = await cache.get(key);
    }
    finish(op, true);
  } catch (err) {
    finish(op, false, err);
  }
}

async function write(plan: Extract<PlannedOp, { kind: 'set' | 'delete' | 'invalidate' }>, id: string): Promise<void> {
  const { kind } = plan;
  const inv = now();
  const versions: Record<string, number> = {};
  const tag = plan.kind === 'invalidate' ? plan.tag : undefined;
  const stale = plan.kind === 'invalidate' && plan.stale;
  if (plan.kind === 'invalidate') {
    for (const key of config.keys.filter((k) => config.tags[k] === plan.tag)) versions[key] = await db.hincrby('db', key, 1);
  } else {
    versions[plan.key] = await db.hincrby('db', plan.key, 1);
  }
  const op = begin<WriteOp>({ id, worker, kind, inv, versions, cacheInv: now(), ...(tag === undefined ? {} : { tag, stale }) });
  try {
    if (kind === 'set') {
      const [key, version] = Object.entries(versions)[0]!;
      const value: ChaosValue = { key, version, src: `set:${id}` };
      await cache.set(key, value, { ttl: config.ttl, tags: [config.tags[key]!] });
    } else if (kind === 'delete') {
      await cache.delete(Object.keys(versions)[0]!);
    } else {
      await cache.invalidateTags([tag!], { stale });
    }
    finish(op, true);
  } catch (err) {
    finish(op, false, err);
  }
}

async function lockOp({ name, holdMs: hold }: Extract<PlannedOp, { kind: 'lock' }>, id: string): Promise<void> {
  const lock = new RedisLock(redis, name, { ttl: config.lockTtlLock, id: label, prefix: 'chaos' });
  const op = begin<LockOp>({ id, worker, kind: 'lock', name, inv: now() });
  let releasing = false;
  try {
    op.token = await lock.acquire({ timeout: config.lockAcquireTimeout });
    op.acquiredAt = now();
    send({ event: 'lock-acquired', id, token: op.token, acquiredAt: op.acquiredAt });
    lock.signal.addEventListener('abort', () => {
      if (!releasing) op.lostAt ??= now();
    });
    await sleep(hold);
    releasing = true;
    op.releaseInv = now();
    op.released = await lock.release();
    op.releaseEnd = now();
    finish(op, true);
  } catch (err) {
    finish(op, false, err);
  }
}

async function loop(index: number): Promise<void> {
  const rng = new Prng(config.seed, 3, worker, incarnation, index);
  while (!stopping) {
    const id = `${label}:${++opCount}`;
    const plan = planOp(rng, config);
    if (plan.kind === 'read' || plan.kind === 'get') await read(plan, id);
    else if (plan.kind === 'lock') await lockOp(plan, id);
    else await write(plan, id);
    await sleep(plan.thinkMs);
  }
}

let go: () => void = () => {};
const started = new Promise<void>((resolve) => (go = resolve));

onCommands(async (command) => {
  if (command.cmd === 'go') go();
  if (command.cmd === 'loader') loaderMode = command.mode as typeof loaderMode;
  if (command.cmd === 'stop') {
    stopping = true;
    const longest = Math.max(...(['read', 'get', 'set', 'delete', 'invalidate', 'lock'] as const).map((k) => opBound(k, config)));
    const settled = Promise.allSettled(loops);
    await Promise.race([settled, sleep(longest)]);
    for (const op of inFlight.values()) send({ event: 'hung', op: { id: op.id, worker, kind: op.kind, inv: op.inv, key: 'key' in op ? op.key : undefined } });
    await Promise.race([cache.close(), sleep(2000)]);
    await Promise.race([closeClient(redis), sleep(1000)]);
    db.disconnect();
    send({ event: 'done' });
    process.exit(0);
  }
});

await db.ping();
// What runs this worker, and how far its wall clock (the library's) is from the run's clock:
// the runner checks both against what it asked for.
const runtime = 'Bun' in globalThis ? 'bun' : 'Deno' in globalThis ? 'deno' : 'node';
send({ event: 'ready', worker, incarnation, pid: process.pid, runtime, wallClockOffset: Date.now() - now() });
if (args.waitForGo) await started;
const loops = Array.from({ length: config.loops }, (_, i) => loop(i));
