/**
 * Fleet scenario of `bench/core.bench.ts`: one side of a stampede, or the hit-path
 * measurements, for the contenders compared there (the parent starts it with --expose-gc).
 *
 * Config: `{ url, baseline? }`. With a baseline checkout (CORE_BENCH_BASELINE in the parent),
 * the process also imports that checkout's `src/index.ts` and offers its `createCache` as the
 * `…@baseline` contenders.
 *
 * - `prepare { contender, key, counterKey }`: a fresh contender, connected and warmed up;
 *   `prepared`.
 * - `go` (`burst`): every call is one caller of the stampede of `key`; a wrong value fails the
 *   call. `done` adds `timeline`: ms after the agreed start of this process's loader start and
 *   end (when it ran the loader), first and last caller settled.
 * - `dispose` → `disposed`: the contender closes.
 * - `hitSetup { keys }` → `hitReady { bytes }`; `hitRound { contenders, mode, slices, … }` →
 *   `hitResult { results: [{ id, ops, ms }] }`.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { sleep } from '../../tools/basics.js';
import { runMember, type MemberContext } from '../../tools/fleet/member.js';
import { monotonicMs } from '../../tools/fleet/plan.js';
import { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { createCache as createAcd } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisDriver } from 'bentocache/drivers/redis';
import { createCache as createCacheManager } from 'cache-manager';
import Keyv from 'keyv';
import KeyvRedis from '@keyv/redis';
import { Mutex } from 'redis-semaphore';
import { createCache, jsonSerializer, type DogpileCache } from '../../src/index.js';
import { LOOKUP } from '../../src/store/cache-scripts.js';
import { EntryCodec } from '../../src/store/codec.js';
import { defaultSerializer } from '../../src/store/serializer.js';

const rawCodec = new EntryCodec(defaultSerializer);

let url = '';

/** The part of another checkout's `src/index.ts` used here (its types are its own). */
interface BaselineCache {
  getOrCompute(key: string, loader: () => Promise<unknown>, ttl: number): Promise<unknown>;
  close(): Promise<void>;
}
interface BaselineModule {
  createCache(options?: { redis?: Redis; l1?: boolean; prefix?: string; serializer?: unknown }): BaselineCache;
  jsonSerializer: unknown;
}
/**
 * dogpile-guard as built from another checkout: its sources, run by tsx like ours. Its imports
 * of ioredis etc. resolve to the same node_modules (the checkouts link the same directory).
 */
let baseline: BaselineModule | undefined;
/** The baseline's Redis prefixes on the hit path: as long as ours, so that keys cost the same. */
const BASELINE_PREFIX = 'dogbase';
const BASELINE_JSON_PREFIX = 'dogbase-json';

function baselineModule(): BaselineModule {
  if (!baseline) throw new Error('no baseline checkout given to this worker');
  return baseline;
}

/** How long a computed value stays cached in every contender (stampedes). */
const TTL_MS = 60_000;
/** The hit path runs longer than a minute: its values must not expire meanwhile. */
const HIT_TTL_MS = 3_600_000;
/** The loader's duration. */
const LOADER_MS = 100;
/** Lock TTL of the lock-guarded cache-asides (dogpile-guard's default lockTtl). */
const LOCK_TTL_MS = 5000;

interface Product {
  id: number;
  name: string;
  price: number;
  tags: string[];
  description: string;
  updatedAt: string;
}

/** The value every loader returns (about 250 bytes as JSON). */
function makeValue(id = 42): Product {
  return {
    id,
    name: `product ${id}`,
    price: 19.99,
    tags: ['kitchen', 'steel', 'sale'],
    description: 'A sturdy stainless-steel kettle with a whistle, a heat-proof handle and a wide spout. '.repeat(2),
    updatedAt: new Date(1_700_000_000_000).toISOString(),
  };
}

type Loader = () => Promise<Product>;

interface Contender {
  call(key: string, loader: Loader): Promise<Product>;
  close(): Promise<void>;
}

async function connect(): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  await client.connect();
  return client;
}

// redlock 4.2.0 ships no type declarations; this is the part of its API used here.
interface RedlockLock {
  unlock(): Promise<void>;
}
type RedlockCtor = new (
  clients: Redis[],
  options: { retryCount?: number; retryDelay?: number; retryJitter?: number },
) => { lock(resource: string, ttl: number): Promise<RedlockLock> };
const Redlock = createRequire(import.meta.url)('redlock') as RedlockCtor;

// async-cache-dedupe's typings describe `define` generically; this is the shape used here.
interface AcdFetcher {
  fetch(key: string): Promise<Product>;
}

/** Plain cache-aside on one client: GET; on a miss run the loader, then SET. */
async function cacheAside(client: Redis, key: string, loader: Loader): Promise<Product> {
  const hit = await client.get(key);
  if (hit !== null) return JSON.parse(hit) as Product;
  const value = await loader();
  await client.set(key, JSON.stringify(value), 'PX', TTL_MS);
  return value;
}

/** Cache-aside guarded by a lock: GET; on a miss lock → GET again → load → SET → unlock. */
async function lockedCacheAside(
  client: Redis,
  key: string,
  loader: Loader,
  lock: () => Promise<() => Promise<unknown>>,
): Promise<Product> {
  const hit = await client.get(key);
  if (hit !== null) return JSON.parse(hit) as Product;
  const unlock = await lock();
  try {
    const again = await client.get(key);
    if (again !== null) return JSON.parse(again) as Product;
    const value = await loader();
    await client.set(key, JSON.stringify(value), 'PX', TTL_MS);
    return value;
  } finally {
    await unlock().catch(() => {});
  }
}

type ContenderName = 'dogpile' | 'dogpile-l1' | 'dogpile@baseline' | 'none' | 'acd' | 'bento' | 'cm' | 'redlock' | 'semaphore';

async function makeContender(name: ContenderName, ttlMs = TTL_MS): Promise<Contender> {
  switch (name) {
    case 'dogpile':
    case 'dogpile-l1': {
      const client = await connect();
      const cache = createCache({ redis: client, l1: name === 'dogpile-l1' });
      return {
        call: (key, loader) => cache.getOrCompute(key, loader, ttlMs),
        close: async () => {
          await cache.close();
          await client.quit();
        },
      };
    }
    case 'dogpile@baseline': {
      const client = await connect();
      const cache = baselineModule().createCache({ redis: client });
      return {
        call: (key, loader) => cache.getOrCompute(key, loader, ttlMs) as Promise<Product>,
        close: async () => {
          await cache.close();
          await client.quit();
        },
      };
    }
    case 'none': {
      const client = await connect();
      return { call: (key, loader) => cacheAside(client, key, loader), close: async () => void (await client.quit()) };
    }
    case 'acd': {
      const client = await connect();
      const loaders = new Map<string, Loader>();
      const cache = createAcd({ ttl: ttlMs / 1000, storage: { type: 'redis', options: { client } } }).define(
        'fetch',
        async (key: string) => loaders.get(key)!(),
      ) as unknown as AcdFetcher;
      return {
        call: (key, loader) => {
          loaders.set(key, loader);
          return cache.fetch(key);
        },
        close: async () => void (await client.quit()),
      };
    }
    case 'bento': {
      const client = await connect();
      const bento = new BentoCache({
        default: 'tiered',
        stores: {
          tiered: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })).useL2Layer(redisDriver({ connection: client })),
        },
      });
      return {
        call: (key, loader) => bento.getOrSet({ key, factory: loader, ttl: ttlMs }),
        close: async () => {
          await bento.disconnect().catch(() => {});
          if (client.status !== 'end') await client.quit().catch(() => {});
        },
      };
    }
    case 'cm': {
      const cache = createCacheManager({ stores: [new Keyv({ store: new KeyvRedis(url) })] });
      return {
        call: (key, loader) => cache.wrap(key, loader, ttlMs),
        close: async () => void (await cache.disconnect()),
      };
    }
    case 'redlock': {
      const client = await connect();
      // Default retryDelay (200 ms) and retryJitter (100 ms); retryCount raised from 10 so that
      // no caller of a 200-caller stampede gives up.
      const redlock = new Redlock([client], { retryCount: 100 });
      return {
        call: (key, loader) =>
          lockedCacheAside(client, key, loader, async () => {
            const lock = await redlock.lock(`${key}:lock`, LOCK_TTL_MS);
            return () => lock.unlock();
          }),
        close: async () => void (await client.quit()),
      };
    }
    case 'semaphore': {
      const client = await connect();
      return {
        call: (key, loader) =>
          lockedCacheAside(client, key, loader, async () => {
            // Defaults: lockTimeout 10 s, acquireTimeout 10 s, retryInterval 10 ms.
            const mutex = new Mutex(client, `${key}:lock`);
            await mutex.acquire();
            return () => mutex.release();
          }),
        close: async () => void (await client.quit()),
      };
    }
  }
}

/**
 * Collects garbage now (the parent starts workers with --expose-gc), so that what an earlier
 * contender left behind — a polling peer makes tens of thousands of promises — is not collected
 * during the next measurement.
 */
function settleHeap(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
}

// --- stampede -------------------------------------------------------------------------

interface Prepared {
  contender: Contender;
  key: string;
  counterKey: string;
}

let counter: Redis | undefined;
let prepared: Prepared | undefined;

async function prepare(msg: { contender: ContenderName; key: string; counterKey: string }): Promise<void> {
  counter ??= await connect();
  const contender = await makeContender(msg.contender);
  // Warm-up on another key: connects lazy clients and loads Lua scripts, so the measured
  // stampede sees a running application, not a cold start.
  await contender.call(`${msg.key}:warmup:${process.pid}`, async () => makeValue(1));
  settleHeap();
  prepared = { contender, key: msg.key, counterKey: msg.counterKey };
}

/** One stampede: its loader, and what this process saw of it. */
function stampede(p: Prepared, at: number, ctx: MemberContext) {
  const incrs: Promise<unknown>[] = [];
  const now = () => monotonicMs() - at;
  const timeline: Record<string, number> = {};
  const loader: Loader = async () => {
    ctx.loaderRan();
    timeline.loaderStart ??= now();
    incrs.push(counter!.incr(p.counterKey));
    await sleep(LOADER_MS);
    timeline.loaderEnd ??= now();
    return makeValue();
  };
  return {
    async call(): Promise<Record<string, unknown>> {
      const value = await p.contender.call(p.key, loader);
      timeline.firstSettled ??= now();
      if (value?.id !== 42) throw new Error(`wrong value: ${JSON.stringify(value)?.slice(0, 80)}`);
      return {};
    },
    async report(): Promise<Record<string, unknown>> {
      timeline.lastSettled = now();
      await Promise.all(incrs);
      // Let trailing commands of the stampede (e.g. an UNSUBSCRIBE) reach Redis inside the window.
      await sleep(100);
      return { timeline };
    },
  };
}

async function dispose(): Promise<void> {
  await prepared?.contender.close().catch(() => {});
  prepared = undefined;
}

// --- hit path -------------------------------------------------------------------------

interface HitState {
  fns: Record<string, (slot: number) => unknown>;
  closers: (() => Promise<unknown>)[];
}

let hit: HitState | undefined;

async function hitSetup(keyCount: number): Promise<{ event: string; bytes: number }> {
  const keys = Array.from({ length: keyCount }, (_, i) => `hit:${i}`);
  const value = makeValue();
  const load = async () => value;
  const client = await connect();
  const dogpile = createCache({ redis: client });
  const dogpileJson = createCache({ redis: client, prefix: 'dogpile-json', serializer: jsonSerializer });
  const dogpileL1 = createCache({ redis: client, l1: true });
  const embedded = createCache();
  const closers: (() => Promise<unknown>)[] = [dogpile, dogpileJson, dogpileL1, embedded].map((c) => () => c.close());
  // The baseline's caches, configured like ours (the JSON one too, so that both builds' code
  // sees the same mix of configurations); its Redis caches write their own values.
  const base = baseline && {
    redis: baseline.createCache({ redis: client, prefix: BASELINE_PREFIX }),
    json: baseline.createCache({ redis: client, prefix: BASELINE_JSON_PREFIX, serializer: baseline.jsonSerializer }),
    l1: baseline.createCache({ redis: client, prefix: BASELINE_PREFIX, l1: true }),
    embedded: baseline.createCache(),
  };
  if (base) for (const c of Object.values(base)) closers.push(() => c.close());
  const peers: Partial<Record<ContenderName, Contender>> = {};
  for (const name of ['acd', 'bento', 'cm'] as const) {
    const c = await makeContender(name, HIT_TTL_MS);
    peers[name] = c;
    closers.push(() => c.close());
  }
  closers.push(() => client.quit());
  for (const key of keys) {
    await dogpile.getOrCompute(key, load, HIT_TTL_MS);
    await dogpileJson.getOrCompute(key, load, HIT_TTL_MS);
    await embedded.getOrCompute(key, load, HIT_TTL_MS);
    if (base) {
      await base.redis.getOrCompute(key, load, HIT_TTL_MS);
      await base.json.getOrCompute(key, load, HIT_TTL_MS);
      await base.embedded.getOrCompute(key, load, HIT_TTL_MS);
    }
    for (const c of Object.values(peers)) await c.call(key, load);
  }
  // The raw baselines read exactly what dogpile-guard stored: its Redis key, and its value.
  const valueKeys = keys.map((k) => `dogpile:v:{${k}}`);
  const lockKeys = keys.map((k) => `dogpile:l:{${k}}`);
  const stored = await client.getBuffer(valueKeys[0]!);
  if (!stored) throw new Error('dogpile-guard did not store the warm value');
  const lru = new LRUCache<string, Product>({ max: 1000 });
  for (const key of keys) lru.set(key, value);
  const asyncLruGet = async (key: string) => lru.get(key);
  const dp = (cache: DogpileCache | BaselineCache) => (slot: number) => cache.getOrCompute(keys[slot]!, load, HIT_TTL_MS);
  // What the HTTP adapters and callers with stale options pass: an options object, checked at every call.
  const withOptions = (cache: DogpileCache | BaselineCache) => (slot: number) => (cache as DogpileCache).getOrCompute(keys[slot]!, load, { ttl: HIT_TTL_MS, staleWhileRevalidate: 1000 });
  if (base) {
    const bytes = await client.getBuffer(`${BASELINE_PREFIX}:v:{${keys[0]!}}`);
    // The stored formats may differ (the baseline's release may write another entry format or serializer): both sizes are reported.
    if (!bytes) throw new Error('the baseline did not store the warm value');
    console.error(`stored bytes: ours ${stored.length}, the baseline ${bytes.length}`);
  }
  hit = {
    closers,
    fns: {
      'raw-get': (slot) => client.getBuffer(valueKeys[slot]!),
      'raw-get-v8': async (slot) => {
        const bytes = await client.getBuffer(valueKeys[slot]!);
        // The bytes as stored, decoded as the library decodes them (entry header, then the default serializer).
        return bytes === null ? undefined : rawCodec.decode(bytes);
      },
      'raw-lookup': (slot) => LOOKUP.runBuffer(client, [valueKeys[slot]!, lockKeys[slot]!], ['bench-token', 5000, '0', '0', '1', '', '0']),
      dogpile: dp(dogpile),
      'dogpile-json': dp(dogpileJson),
      'dogpile-l1': dp(dogpileL1),
      'dogpile-embedded': dp(embedded),
      'dogpile-embedded-options': withOptions(embedded),
      'raw-lru': (slot) => lru.get(keys[slot]!),
      'async-lru': (slot) => asyncLruGet(keys[slot]!),
      acd: (slot) => peers.acd!.call(keys[slot]!, load),
      bento: (slot) => peers.bento!.call(keys[slot]!, load),
      cm: (slot) => peers.cm!.call(keys[slot]!, load),
      ...(base && {
        'dogpile@baseline': dp(base.redis),
        'dogpile-json@baseline': dp(base.json),
        'dogpile-l1@baseline': dp(base.l1),
        'dogpile-embedded@baseline': dp(base.embedded),
        'dogpile-embedded-options@baseline': withOptions(base.embedded),
      }),
    },
  };
  return { event: 'hitReady', bytes: stored.length };
}

type HitMode = 'seq' | 'inflight-same' | 'inflight-distinct';

/** Runs `ops` reads: one after another, or 100 in flight (same key, or one key per lane). */
async function runReads(fn: (slot: number) => unknown, mode: HitMode, ops: number, sync: boolean): Promise<void> {
  if (mode === 'seq') {
    if (sync) {
      let found = 0;
      for (let i = 0; i < ops; i++) if (fn(0) !== undefined) found++;
      if (found !== ops) throw new Error('raw lru-cache missed');
      return;
    }
    for (let i = 0; i < ops; i++) await fn(0);
    return;
  }
  let issued = 0;
  const lane = async (slot: number) => {
    const s = mode === 'inflight-same' ? 0 : slot;
    while (issued < ops) {
      issued++;
      await fn(s);
    }
  };
  await Promise.all(Array.from({ length: 100 }, (_, slot) => lane(slot)));
}

/**
 * One interleaved measurement: after a warm-up of each contender, `slices` rounds in which
 * every contender runs one slice (a fixed number of reads, or batches of 1000 reads until
 * `sliceMs` passed), in an order rotated every round (a contender and its baseline also trade
 * places every other round). Interleaving keeps slow drifts of the
 * machine from favouring whichever contender happened to run at a quiet moment.
 */
async function hitRound(msg: { contenders: string[]; mode: HitMode; slices: number; opsPerSlice?: number; sliceMs?: number; warmup: number }): Promise<{ event: string; results: unknown[] }> {
  const fns = msg.contenders.map((id) => {
    const fn = hit?.fns[id];
    if (!fn) throw new Error(`unknown hit contender ${id}`);
    return { id, fn, sync: id === 'raw-lru', ops: 0, ms: 0 };
  });
  for (const c of fns) await runReads(c.fn, msg.mode, msg.warmup, c.sync);
  settleHeap();
  // A contender and its baseline (`x` and `x@baseline`) sit next to each other in the list, so
  // one would always run right after the other (and inherit its garbage): in every other slice
  // they trade places.
  const partner = new Map<number, number>();
  fns.forEach((c, i) => {
    const j = fns.findIndex((o) => o.id === `${c.id}@baseline`);
    if (j !== -1) partner.set(i, j).set(j, i);
  });
  for (let s = 0; s < msg.slices; s++) {
    for (let i = 0; i < fns.length; i++) {
      const at = (i + s) % fns.length;
      const c = fns[s % 2 === 1 ? (partner.get(at) ?? at) : at]!;
      const t0 = performance.now();
      if (msg.opsPerSlice !== undefined) {
        await runReads(c.fn, msg.mode, msg.opsPerSlice, c.sync);
        c.ops += msg.opsPerSlice;
      } else {
        while (performance.now() - t0 < msg.sliceMs!) {
          await runReads(c.fn, msg.mode, 1000, c.sync);
          c.ops += 1000;
        }
      }
      c.ms += performance.now() - t0;
    }
  }
  return { event: 'hitResult', results: fns.map(({ id, ops, ms }) => ({ id, ops, ms })) };
}

// --- the fleet member ------------------------------------------------------------------

runMember<{ url: string; baseline?: string }>({
  async start(config, ctx) {
    url = config.url;
    // dogpile-guard as built from another checkout: its sources, run by tsx like ours. Its
    // imports of ioredis etc. resolve to the same node_modules (the checkouts link the same directory).
    if (config.baseline) baseline = (await import(pathToFileURL(path.join(config.baseline, 'src', 'index.ts')).href)) as BaselineModule;
    let run: ReturnType<typeof stampede> | undefined;
    return {
      prepare: (msg) => prepare(msg as never),
      beforeRun(command) {
        if (!prepared) throw new Error('go before prepare');
        run = stampede(prepared, command.at, ctx);
      },
      call: () => run!.call(),
      report: () => run!.report(),
      commands: {
        dispose: async () => {
          await dispose();
          return { event: 'disposed' };
        },
        hitSetup: (msg) => hitSetup(msg.keys as number),
        hitRound: (msg) => hitRound(msg as never),
      },
      async close() {
        await dispose();
        for (const close of hit?.closers ?? []) await close().catch(() => {});
        await counter?.quit().catch(() => {});
      },
    };
  },
});
