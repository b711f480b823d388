/**
 * Child process of `bench/expiry-cliff.bench.ts`: one of the processes of the fleet, calling
 * hot keys on an open-loop schedule through one contender.
 *
 *   node --import tsx bench/expiry-cliff-worker.ts <redis url>
 *
 * Parent → worker: JSON commands on stdin, one a line. Worker → parent: JSON messages on stdout,
 * one a line (`JsonChild` of tools/child-process.ts; lines that are not JSON are ignored).
 *
 *   {cmd:'prepare', contender, prefix, keys, runsKey, counterKey, config} → {event:'prepared', unavailable?: option, message?}
 *   {cmd:'go', at, rate, phaseMs, keyOffset, warmupMs, measureMs}      → {event:'done', lat, lag, age, status, errors, …}
 *   {cmd:'exit'}                                                       → closes everything and exits
 *
 * A failing command answers {event:'fatal', message} and the worker exits with code 1.
 *
 * The worker exits by itself when stdin closes (the parent is gone).
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { sleep } from '../tools/basics.js';
import { Redis } from 'ioredis';
import { createCache as createAcd } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisDriver } from 'bentocache/drivers/redis';
import { createCache as createCacheManager } from 'cache-manager';
import Keyv from 'keyv';
import KeyvRedis from '@keyv/redis';
import { createCache, InvalidOptionError, type CacheOptions } from '../src/index.js';

const url = process.argv[2];
if (!url) throw new Error('usage: expiry-cliff-worker.ts <redis url>');

/** The parameters of the run, sent by the parent with `prepare`. */
interface Config {
  /** How long a value is fresh, in every contender (ms). */
  ttlMs: number;
  /** The loader's duration (a timer, ms). */
  loaderMs: number;
  /** The stale window of the contenders that serve stale values (s). */
  staleS: number;
  /** cache-manager refreshes in the background when less than this is left of the TTL (ms). */
  refreshThresholdMs: number;
}
let cfg: Config = { ttlMs: 1000, loaderMs: 100, staleS: 10, refreshThresholdMs: 300 };

/** Calls still pending this long after the last scheduled start are counted as errors. */
const DRAIN_MS = 15_000;

/** What every loader returns: when it was computed (ms since the epoch). */
interface Value {
  at: number;
}
type Loader = () => Promise<Value>;

interface Answer {
  value: Value;
  /** dogpile-guard only: `resolve()`'s status. */
  status?: string;
}

interface Contender {
  call(key: string, loader: Loader): Promise<Answer>;
  close(): Promise<void>;
}

/** The options of the freshness lifecycle each dogpile-guard contender sets on `createCache`. */
function dogpileOptions(name: string): Record<string, unknown> | undefined {
  const swr = { staleWhileRevalidate: `${cfg.staleS}s` };
  switch (name) {
    case 'dogpile':
      return {};
    case 'dogpile-swr':
      return swr;
    case 'dogpile-early-1':
      return { ...swr, earlyRefresh: true };
    case 'dogpile-early-2':
      return { ...swr, earlyRefresh: { beta: 2 } };
    case 'dogpile-early-4':
      return { ...swr, earlyRefresh: { beta: 4 } };
    default:
      return undefined;
  }
}

function send(msg: { event: string } & Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

async function connect(): Promise<Redis> {
  const client = new Redis(url!, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  await client.connect();
  return client;
}

class Unavailable extends Error {
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(message);
  }
}

// async-cache-dedupe's typings describe `define` generically; this is the shape used here.
interface AcdFetcher {
  fetch(key: string): Promise<Value>;
}

async function makeContender(name: string): Promise<Contender> {
  const lifecycle = dogpileOptions(name);
  if (lifecycle) {
    const client = await connect();
    let cache;
    try {
      // The lifecycle options are not in every build's CacheOptions type.
      cache = createCache({ redis: client, ...lifecycle } as CacheOptions);
    } catch (err) {
      await client.quit();
      if (err instanceof InvalidOptionError && Object.keys(lifecycle).some((k) => err.option === k || err.option.startsWith(`${k}.`))) {
        throw new Unavailable(err.option, err.message);
      }
      throw err;
    }
    return {
      call: async (key, loader) => {
        const r = await cache.resolve(key, loader, cfg.ttlMs);
        return { value: r.value, status: String(r.status) };
      },
      close: async () => {
        await cache.close();
        await client.quit();
      },
    };
  }
  switch (name) {
    case 'acd': {
      const client = await connect();
      const loaders = new Map<string, Loader>();
      const cache = createAcd({ ttl: cfg.ttlMs / 1000, stale: cfg.staleS, storage: { type: 'redis', options: { client } } }).define(
        'fetch',
        async (key: string) => loaders.get(key)!(),
      ) as unknown as AcdFetcher;
      return {
        call: async (key, loader) => {
          loaders.set(key, loader);
          return { value: await cache.fetch(key) };
        },
        close: async () => void (await client.quit()),
      };
    }
    case 'bento': {
      const client = await connect();
      const bento = new BentoCache({
        default: 'tiered',
        grace: `${cfg.staleS}s`,
        timeout: 0,
        stores: {
          tiered: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })).useL2Layer(redisDriver({ connection: client })),
        },
      });
      return {
        call: async (key, loader) => ({ value: await bento.getOrSet({ key, factory: loader, ttl: cfg.ttlMs }) }),
        close: async () => {
          await bento.disconnect().catch(() => {});
          if (client.status !== 'end') await client.quit().catch(() => {});
        },
      };
    }
    case 'cm': {
      const cache = createCacheManager({ stores: [new Keyv({ store: new KeyvRedis(url) })] });
      return {
        call: async (key, loader) => ({ value: await cache.wrap(key, loader, cfg.ttlMs, cfg.refreshThresholdMs) }),
        close: async () => void (await cache.disconnect()),
      };
    }
    default:
      throw new Error(`unknown contender ${name}`);
  }
}

// --- the run ----------------------------------------------------------------------------

interface Prepared {
  contender: Contender;
  keys: string[];
  runsKey: string;
  counterKey: string;
}

let counter: Redis | undefined;
let prepared: Prepared | undefined;

async function prepare(msg: { contender: string; prefix: string; keys: number; runsKey: string; counterKey: string; config: Config }): Promise<void> {
  cfg = msg.config;
  counter ??= await connect();
  let contender: Contender;
  try {
    contender = await makeContender(msg.contender);
  } catch (err) {
    if (err instanceof Unavailable) return send({ event: 'prepared', unavailable: err.option, message: err.message });
    throw err;
  }
  // Connects lazy clients and loads scripts on a key outside the measured set.
  await contender.call(`${msg.prefix}:warmup:${process.pid}`, async () => ({ at: Date.now() }));
  const keys = Array.from({ length: msg.keys }, (_, i) => `${msg.prefix}:hot:${i}`);
  prepared = { contender, keys, runsKey: msg.runsKey, counterKey: msg.counterKey };
  send({ event: 'prepared' });
}

const round2 = (v: number) => Math.round(v * 100) / 100;

/**
 * Open loop: call `i` is due at `start + phaseMs + i / rate`, on key `i + keyOffset`; whatever is due is started when
 * the timer wakes, however many calls are still pending, and each call's latency counts from
 * when it was due (a stalled process does not hide its stall by calling less).
 */
async function go(msg: { at: number; rate: number; phaseMs: number; keyOffset: number; warmupMs: number; measureMs: number }): Promise<void> {
  const p = prepared;
  if (!p) throw new Error('go before prepare');
  const interval = 1000 / msg.rate;
  // The agreed start (epoch ms) on this process's monotonic clock.
  const start = performance.now() + (msg.at - (performance.timeOrigin + performance.now()));
  // Calls [0, warmupCalls) warm up; the rest, up to totalCalls, are measured.
  const warmupCalls = Math.round(msg.warmupMs / interval);
  const totalCalls = warmupCalls + Math.round(msg.measureMs / interval);
  const measureFromEpoch = msg.at + msg.warmupMs;
  const measureEndEpoch = measureFromEpoch + msg.measureMs;
  const writes: Promise<unknown>[] = [];
  let localRuns = 0;
  const loaderFor =
    (key: string): Loader =>
    async () => {
      const t = Date.now();
      localRuns++;
      writes.push(counter!.rpush(p.runsKey, `${key}|${t}|${process.pid}`));
      if (t >= measureFromEpoch && t < measureEndEpoch) writes.push(counter!.incr(p.counterKey));
      await sleep(cfg.loaderMs);
      return { at: Date.now() };
    };
  const loaders = new Map(p.keys.map((k) => [k, loaderFor(k)]));

  const lat: number[] = [];
  const lag: number[] = [];
  const age: number[] = [];
  const status: string[] = [];
  const errors: string[] = [];
  let errorCount = 0;
  /** Measured calls not settled yet. */
  let pending = 0;
  let i = 0;
  const dueAt = (n: number) => start + msg.phaseMs + n * interval;
  const fire = () => {
    const due = dueAt(i);
    const key = p.keys[(i + msg.keyOffset) % p.keys.length]!;
    const measured = i >= warmupCalls;
    i++;
    const t0 = performance.now();
    const startedAt = Date.now();
    if (measured) pending++;
    p.contender.call(key, loaders.get(key)!).then(
      (answer) => {
        if (!measured) return;
        pending--;
        lat.push(round2(performance.now() - due));
        lag.push(round2(t0 - due));
        age.push(startedAt - answer.value.at);
        status.push(answer.status ?? '');
      },
      (err: unknown) => {
        if (!measured) return;
        pending--;
        errorCount++;
        if (errors.length < 5) errors.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
      },
    );
  };
  while (i < totalCalls) {
    const now = performance.now();
    while (i < totalCalls && dueAt(i) <= now) fire();
    if (i < totalCalls) await sleep(Math.max(0, dueAt(i) - performance.now()));
  }
  const drainUntil = performance.now() + DRAIN_MS;
  while (pending > 0 && performance.now() < drainUntil) await sleep(10);
  if (pending > 0) {
    errorCount += pending;
    errors.push(`${pending} measured calls did not settle within ${DRAIN_MS} ms of the last scheduled start`);
  }
  await Promise.all(writes);
  send({ event: 'done', lat, lag, age, status, errors, errorCount, localRuns, issued: i });
}

async function shutdown(): Promise<never> {
  await prepared?.contender.close().catch(() => {});
  await counter?.quit().catch(() => {});
  process.exit(0);
}

const rl = createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on('line', (line) => {
  const msg = JSON.parse(line) as { cmd: string } & Record<string, unknown>;
  queue = queue
    .then(async () => {
      switch (msg.cmd) {
        case 'prepare':
          return prepare(msg as never);
        case 'go':
          return go(msg as never);
        case 'exit':
          return void (await shutdown());
        default:
          throw new Error(`unknown command ${msg.cmd}`);
      }
    })
    .catch((err: unknown) => {
      send({ event: 'fatal', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      process.exit(1);
    });
});
rl.on('close', () => void queue.then(shutdown));
send({ event: 'up', pid: process.pid });
