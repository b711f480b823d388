/**
 * Fleet scenario of the refresh-cost benchmark (`bench/refresh-cost.bench.ts`).
 *
 * Config: `{ url, settings: { key, counterKey, ttl, options } }`. The process holds a
 * `createCache({ redis, ...options })` on its own ioredis client; a call is
 * `getOrCompute(key, loader, ttl)`, run in open-ended lanes (`lanes` without `calls`, `pauseMs`
 * between calls, `records: false`) until the parent stops them. The loader counts its runs
 * with `INCR counterKey` on a separate connection (in a script that also answers the server's
 * `TIME`, so runs of different processes are placed on one clock), then waits `LOADER_MS`.
 *
 * Every command this process writes to the cache's connections (its client and the
 * subscriber connection the library duplicates from it; not the counter's) is tallied by
 * name, `EVALSHA`/`EVAL` by script, each plain `GET` by whether it found a value, each
 * lookup-or-lead script by its answer, and every (un)subscribe with its time. Each run's
 * `done` carries `tally`, the totals since the process started (a snapshot taken while nothing
 * of this process is in flight: every lane has ended its call).
 */
import { Command, Redis } from 'ioredis';
import { createCache, type CacheOptions } from '../../src/index.js';
import { COMMIT, DELETE_ANNOUNCE, LOOKUP, SET_ANNOUNCE, TAG_INVALIDATE } from '../../src/store/cache-scripts.js';
import { EXTEND } from '../../src/redis/extend-script.js';
import { runMember } from '../../tools/fleet/member.js';

interface Settings {
  key: string;
  counterKey: string;
  ttl: number;
  options: Partial<CacheOptions>;
}

/** How long a loader run takes (after its INCR). */
const LOADER_MS = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function connect(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
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

let counter: Redis | undefined;
const toWritable = Command.prototype.toWritable;
Command.prototype.toWritable = function (this: Command, socket: unknown) {
  // The loader's counter is the benchmark's own connection: not counted.
  if (socket !== counter?.stream) {
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

// --- the cache and its calls ----------------------------------------------------------------

/** INCR of the run counter, and the server's clock at that moment. */
const COUNT_RUN = "local n = redis.call('INCR', KEYS[1]) local t = redis.call('TIME') return {n, t[1], t[2]}";

runMember<{ url: string; settings: Settings }>({
  async start({ url, settings }) {
    counter = connect(url);
    const redis = connect(url);
    const cache = createCache({ ...settings.options, redis });
    let loaderRuns = 0;
    /** When each loader run started (ms on the Redis server's clock). */
    const runStarts: number[] = [];
    const loader = async () => {
      loaderRuns++;
      const [, sec, usec] = (await counter!.eval(COUNT_RUN, 1, settings.counterKey)) as [number, string, string];
      runStarts.push(Number(sec) * 1000 + Number(usec) / 1000);
      await sleep(LOADER_MS);
      return { pid: process.pid, at: Date.now() };
    };
    let calls = 0;
    let errors = 0;
    let firstError: string | undefined;
    await Promise.all([redis.ping(), counter.ping()]);
    return {
      async call() {
        try {
          await cache.getOrCompute(settings.key, loader, settings.ttl);
          calls++;
        } catch (err) {
          errors++;
          firstError ??= err instanceof Error ? err.message : String(err);
        }
        return {};
      },
      report: () => ({
        tally: { calls, errors, firstError, loaderRuns, runStarts: [...runStarts], emptyGets, sent: Object.fromEntries(sent), lookups: Object.fromEntries(lookups), pubsub: [...pubsub] },
      }),
      async close() {
        await cache.close().catch(() => {});
        for (const c of [redis, counter!]) await c.quit().catch(() => {});
      },
    };
  },
});
