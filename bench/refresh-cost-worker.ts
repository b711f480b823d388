/**
 * One process of the refresh-cost benchmark (`bench/refresh-cost.bench.ts`):
 *
 *   node --import tsx bench/refresh-cost-worker.ts <redis url> <settings JSON>
 *
 * Settings: `{ key, counterKey, ttl, lanes, pauseMs, options }`. The process holds a
 * `createCache({ redis, ...options })` on its own ioredis client; `lanes` lanes each call
 * `getOrCompute(key, loader, ttl)` in a loop, awaiting each call and pausing `pauseMs` between
 * calls. The loader counts its runs with `INCR counterKey` on a separate connection (in a
 * script that also answers the server's `TIME`, so runs of different processes are placed on one
 * clock), then waits `LOADER_MS`.
 *
 * Every command this process writes to the cache's connections (its client and the
 * subscriber connection the library duplicates from it; not the counter's) is tallied by
 * name, `EVALSHA`/`EVAL` by script, each plain `GET` by whether it found a value, each
 * lookup-or-lead script by its answer, and every (un)subscribe with its time.
 * Commands are JSON lines on stdin, answers JSON lines on stdout (`JsonChild`):
 *
 * - `start`: the lanes begin.
 * - `pause`: every lane finishes its call in progress and waits; then `paused { tally }`,
 *   the totals so far (a snapshot the parent takes while nothing of this process is in flight).
 * - `resume`: the lanes go on.
 * - `exit`: the lanes stop, the cache and the connections close, the process exits.
 */
import { createInterface } from 'node:readline';
import { Command, Redis } from 'ioredis';
import { createCache, type CacheOptions } from '../src/index.js';
import { COMMIT, DELETE_ANNOUNCE, LOOKUP, SET_ANNOUNCE, TAG_INVALIDATE } from '../src/store/cache-scripts.js';
import { EXTEND } from '../src/redis/extend-script.js';

const url = process.argv[2];
const settingsArg = process.argv[3];
if (!url || !settingsArg) throw new Error('usage: refresh-cost-worker.ts <redis url> <settings JSON>');
const settings = JSON.parse(settingsArg) as { key: string; counterKey: string; ttl: number; lanes: number; pauseMs: number; options: Partial<CacheOptions> };

/** How long a loader run takes (after its INCR). */
const LOADER_MS = 50;

function send(msg: { event: string } & Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function connect(): Redis {
  const client = new Redis(url!, { maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  return client;
}

// --- the tally of what the cache's connections write ----------------------------------------

/** The library's scripts by SHA1 and by source, to name an EVALSHA or EVAL. */
const scripts = [LOOKUP, COMMIT, SET_ANNOUNCE, DELETE_ANNOUNCE, TAG_INVALIDATE, EXTEND];
const scriptBySha = new Map<string, string>(scripts.map((s) => [s.sha, s.name]));
const scriptBySource = new Map<string, string>(scripts.map((s) => [s.source, s.name]));

/** Commands written, by name (`evalsha lookup`, `get`, `subscribe`, ...). */
const sent = new Map<string, number>();
/** Plain GETs answered with nothing (the value had expired or was not there yet). */
let emptyGets = 0;
/** Lookup-or-lead scripts by answer: `value`, `lead`, `wait`, `stale+lead`, `stale` (see LookupReply). */
const lookups = new Map<string, number>();
/** Every (un)subscribe written: the command and when (ms since the epoch). */
const pubsub: { name: string; at: number }[] = [];
const PUBSUB = new Set(['subscribe', 'unsubscribe', 'ssubscribe', 'sunsubscribe', 'psubscribe', 'punsubscribe']);

function lookupAnswer(reply: unknown): string {
  if (!Array.isArray(reply)) return 'other';
  switch (Number(reply[0])) {
    case 1:
      return 'value';
    case 2:
      return 'lead';
    case 3:
      return 'wait';
    case 5:
      return reply[2] === 1 ? 'stale+lead' : 'stale';
    default:
      return 'other';
  }
}

const counter = connect();
const toWritable = Command.prototype.toWritable;
Command.prototype.toWritable = function (this: Command, socket: unknown) {
  // The loader's counter is the benchmark's own connection: not counted.
  if (socket !== counter.stream) {
    let name = this.name.toLowerCase();
    if (name === 'evalsha' || name === 'eval') {
      const first = String(this.args[0]);
      name = `${name} ${(name === 'evalsha' ? scriptBySha.get(first) : scriptBySource.get(first)) ?? 'other'}`;
      if (name.endsWith(' lookup')) {
        this.promise.then(
          (reply: unknown) => {
            const answer = lookupAnswer(reply);
            lookups.set(answer, (lookups.get(answer) ?? 0) + 1);
          },
          () => {},
        );
      }
    } else if (name === 'client' || name === 'config' || name === 'command') {
      // Named like `INFO commandstats` names them (`client|setinfo`).
      name = `${name}|${String(this.args[0]).toLowerCase()}`;
    } else if (name === 'get') {
      this.promise.then(
        (reply: unknown) => {
          if (reply === null) emptyGets++;
        },
        () => {},
      );
    }
    if (PUBSUB.has(name)) pubsub.push({ name, at: Date.now() });
    sent.set(name, (sent.get(name) ?? 0) + 1);
  }
  return toWritable.call(this, socket as never);
};

// --- the cache and the lanes ----------------------------------------------------------------

const redis = connect();
const cache = createCache({ ...settings.options, redis });

/** INCR of the run counter, and the server's clock at that moment. */
const COUNT_RUN = "local n = redis.call('INCR', KEYS[1]) local t = redis.call('TIME') return {n, t[1], t[2]}";
let loaderRuns = 0;
/** When each loader run started (ms on the Redis server's clock). */
const runStarts: number[] = [];
const loader = async () => {
  loaderRuns++;
  const [, sec, usec] = (await counter.eval(COUNT_RUN, 1, settings.counterKey)) as [number, string, string];
  runStarts.push(Number(sec) * 1000 + Number(usec) / 1000);
  await sleep(LOADER_MS);
  return { pid: process.pid, at: Date.now() };
};

let calls = 0;
let errors = 0;
let firstError: string | undefined;
let stopping = false;
/** While set, lanes wait on it (`pause`). */
let gate: Promise<void> | undefined;
let openGate: (() => void) | undefined;
let parked = 0;
let lanes: Promise<void>[] = [];

async function lane(): Promise<void> {
  while (!stopping) {
    if (gate) {
      parked++;
      await gate;
      parked--;
      continue;
    }
    try {
      await cache.getOrCompute(settings.key, loader, settings.ttl);
      calls++;
    } catch (err) {
      errors++;
      firstError ??= err instanceof Error ? err.message : String(err);
    }
    await sleep(settings.pauseMs);
  }
}

function tally() {
  return { calls, errors, firstError, loaderRuns, runStarts: [...runStarts], emptyGets, sent: Object.fromEntries(sent), lookups: Object.fromEntries(lookups), pubsub: [...pubsub] };
}

async function pause(): Promise<void> {
  if (!gate) gate = new Promise((resolve) => (openGate = resolve));
  const deadline = performance.now() + 10_000;
  while (parked < lanes.length) {
    if (performance.now() > deadline) throw new Error(`${lanes.length - parked} lane(s) still busy 10 s after pause`);
    await sleep(1);
  }
  send({ event: 'paused', tally: tally() });
}

function resume(): void {
  gate = undefined;
  openGate?.();
}

async function shutdown(): Promise<never> {
  stopping = true;
  resume();
  await Promise.all(lanes);
  await cache.close().catch(() => {});
  for (const c of [redis, counter]) await c.quit().catch(() => {});
  process.exit(0);
}

// --- main loop --------------------------------------------------------------------------

function fatal(err: unknown): never {
  send({ event: 'fatal', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
}
process.on('unhandledRejection', (reason) => fatal(reason));

const rl = createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on('line', (line) => {
  const msg = JSON.parse(line) as { cmd: string };
  queue = queue
    .then(async () => {
      switch (msg.cmd) {
        case 'start':
          lanes = Array.from({ length: settings.lanes }, () => lane());
          return send({ event: 'started' });
        case 'pause':
          return pause();
        case 'resume':
          return resume();
        case 'exit':
          return void (await shutdown());
        default:
          throw new Error(`unknown command ${msg.cmd}`);
      }
    })
    .catch(fatal);
});
rl.on('close', () => void queue.then(shutdown));

await Promise.all([redis.ping(), counter.ping()]);
send({ event: 'up', pid: process.pid });
