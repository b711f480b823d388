/**
 * Fleet scenario of the expiry-cliff benchmark (`bench/expiry-cliff.bench.ts`): one process of
 * the fleet, calling hot keys on an open-loop schedule (`open` runs) through one contender.
 *
 * Config: `{ url }`.
 * - `prepare { contender, prefix, keys, keyOffset, runsKey, counterKey, warmupMs, measureMs, config }`
 *   makes the contender and warms it up on a key outside the measured set; `prepared`, or
 *   `prepared { unavailable: option, message }` when this build refuses the contender's options.
 * - `go` (`open`): call `i` is on key `i + keyOffset`; its record carries the answer's `status`
 *   (dogpile-guard only) and `age`, how old the value was when the call started (ms). Every loader
 *   run appends `<key>|<start>|<pid>` to `runsKey`, and those that start in the measured window
 *   (`warmupMs` after the run's start, for `measureMs`) also INCR `counterKey`; times are on the
 *   fleet's monotonic clock.
 */
import { Redis } from 'ioredis';
import { createCache as createAcd } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisDriver } from 'bentocache/drivers/redis';
import { createCache as createCacheManager } from 'cache-manager';
import Keyv from 'keyv';
import KeyvRedis from '@keyv/redis';
import { createCache, InvalidOptionError, type CacheOptions } from '../../src/index.js';
import { sleep } from '../../tools/basics.js';
import { runMember } from '../../tools/fleet/member.js';
import { monotonicMs } from '../../tools/fleet/plan.js';

let url = '';

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

/** What every loader returns: when it was computed (on the fleet's monotonic clock). */
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

async function connect(): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
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

interface Prepared {
  contender: Contender;
  keys: string[];
  keyOffset: number;
  runsKey: string;
  counterKey: string;
  warmupMs: number;
  measureMs: number;
}

runMember<{ url: string }>({
  async start(config) {
    url = config.url;
    const counter = await connect();
    let prepared: Prepared | undefined;
    let window = { from: 0, to: 0 };
    let writes: Promise<unknown>[] = [];
    const loaders = new Map<string, Loader>();
    const loaderFor =
      (p: Prepared, key: string): Loader =>
      async () => {
        const t = monotonicMs();
        writes.push(counter.rpush(p.runsKey, `${key}|${t}|${process.pid}`));
        if (t >= window.from && t < window.to) writes.push(counter.incr(p.counterKey));
        await sleep(cfg.loaderMs);
        return { at: monotonicMs() };
      };
    const release = async () => {
      await prepared?.contender.close().catch(() => {});
      prepared = undefined;
    };
    return {
      async prepare(msg) {
        await release();
        cfg = msg.config as Config;
        let contender: Contender;
        try {
          contender = await makeContender(String(msg.contender));
        } catch (err) {
          if (err instanceof Unavailable) return { unavailable: err.option, message: err.message };
          throw err;
        }
        // Connects lazy clients and loads scripts on a key outside the measured set.
        await contender.call(`${String(msg.prefix)}:warmup:${process.pid}`, async () => ({ at: monotonicMs() }));
        const keys = Array.from({ length: Number(msg.keys) }, (_, i) => `${String(msg.prefix)}:hot:${i}`);
        const p: Prepared = { contender, keys, keyOffset: Number(msg.keyOffset), runsKey: String(msg.runsKey), counterKey: String(msg.counterKey), warmupMs: Number(msg.warmupMs), measureMs: Number(msg.measureMs) };
        loaders.clear();
        for (const key of keys) loaders.set(key, loaderFor(p, key));
        prepared = p;
      },
      beforeRun(command) {
        if (!prepared) throw new Error('go before prepare');
        window = { from: command.at + prepared.warmupMs, to: command.at + prepared.warmupMs + prepared.measureMs };
        writes = [];
      },
      async call({ index }) {
        const p = prepared!;
        const key = p.keys[(index + p.keyOffset) % p.keys.length]!;
        const startedAt = monotonicMs();
        const answer = await p.contender.call(key, loaders.get(key)!);
        return { status: answer.status ?? '', age: startedAt - answer.value.at };
      },
      async report() {
        // The loaders' records reach Redis before the parent reads them.
        await Promise.all(writes);
        return {};
      },
      async close() {
        await Promise.all(writes);
        await release();
        await counter.quit().catch(() => {});
      },
    };
  },
});
