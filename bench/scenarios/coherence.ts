/**
 * Fleet scenario of the coherence benchmark (`bench/coherence.bench.ts`), driven by its
 * commands (tools/fleet/member.ts). Config: `{ url }`.
 *
 * It holds a `createCache({ redis, l1: { ttl: 60 s } })` and, next to it, a plain ioredis
 * subscriber on the raw channel `RAW_CHANNEL` (the reference delivery). Its commands:
 *
 * - `arm { kind, key, tags, version }`: reads `key` until it is answered from the L1, then
 *   watches it: from now on the loader returns `version`, and the key is read right after each
 *   message the cache's subscriber connection delivers (see `afterLibrary`) and every 1 ms by
 *   a timer; `armed`. Once a read returns `version` (or after `WATCH_MS`): `seen { dropped,
 *   fresh, by }`: when the first read not answered from the L1 with the old value started,
 *   when the first read returning the new value ended, and which reader saw the drop first.
 *   `armed { previousRuns, warmRuns }`: when each loader run of the key since it was last
 *   armed started (ms since the epoch): those of its previous round, late ones included; and
 *   the runs of the warm-up reads (none expected).
 * - `collect { key }`: `collected { runs }`, the same for the key's last round.
 * - `publish { id }`: PUBLISH of `id` on the raw channel; `published { call, reply }`.
 *   Every worker answers a raw message with `raw { id, at }`.
 * - `write { kind, key, tags, version }`: `invalidateTags(tags)`, `delete(key)` or `set(key,
 *   { version })`; `written { call, resolved }`.
 * - `hits { ... }`: the L1 hit throughput comparison (see `hits()`); `hitResult`.
 *
 * Every time is `process.hrtime.bigint()` in ns as a number: CLOCK_MONOTONIC on Linux, one
 * clock for every process of the machine, so times taken in different processes compare.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { createCache, type DogpileCache } from '../../src/index.js';
import { fail, memberConfig, runMember, send } from '../../tools/fleet/member.js';

const { url } = memberConfig<{ url: string }>();

const RAW_CHANNEL = 'bench:coherence:raw';
/** The L1 TTL: far longer than a round, so only the channel can make a copy go. */
const L1_TTL_MS = 60_000;
const ENTRY_TTL_MS = 600_000;
/** A round that has not shown the new value after this long reports a timeout. */
const WATCH_MS = 3000;
/** The timer reader's period (ms). */
const POLL_MS = 1;

type Kind = 'invalidate' | 'delete' | 'set';
interface Value {
  version: number;
  pid: number;
}

const nowNs = () => Number(process.hrtime.bigint());

function connect(): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  return client;
}

// --- the cache under measurement, and a listener after the library's own ------------------

const redis = connect();
/**
 * The cache's subscriber connection is a `duplicate()` of its client. A `messageBuffer`
 * listener added to it a microtask later runs after the library's listener (registered when
 * the connection is made), so when it reads the key, the library has already applied the
 * message to its L1: the read shows the state of the L1 at the moment the process handled the
 * delivery, as the raw subscriber's listener shows the moment its message arrived.
 */
const duplicate = redis.duplicate.bind(redis);
redis.duplicate = ((...args: Parameters<Redis['duplicate']>) => {
  const connection = duplicate(...args);
  queueMicrotask(() => connection.on('messageBuffer', () => afterLibrary()));
  return connection;
}) as Redis['duplicate'];
const cache: DogpileCache = createCache({ redis, l1: { max: 1000, ttl: L1_TTL_MS } });
let lastLayer = '';
cache.on('hit', (e) => (lastLayer = e.layer));

const publisher = connect();
const rawSubscriber = connect();
rawSubscriber.on('messageBuffer', (_channel: Buffer, message: Buffer) => {
  const at = nowNs();
  send({ event: 'raw', id: Number(message.toString()), at });
});

/** What the loader of each key returns: the version of its current round once armed. */
const versions = new Map<string, number>();
/** When (ms since the epoch) each loader run of a key started, since the key was last armed. */
const runsOf = new Map<string, number[]>();
const loaders = new Map<string, () => Promise<Value>>();
function loaderOf(key: string): () => Promise<Value> {
  let loader = loaders.get(key);
  if (!loader) {
    loader = async () => {
      const runs = runsOf.get(key) ?? [];
      runs.push(Date.now());
      runsOf.set(key, runs);
      return { version: versions.get(key) ?? 0, pid: process.pid };
    };
    loaders.set(key, loader);
  }
  return loader;
}

interface Watch {
  key: string;
  tags: string[] | undefined;
  version: number;
  dropped: number | undefined;
  by: string | undefined;
  fresh: number | undefined;
  timer: NodeJS.Timeout | undefined;
  deadline: number;
  done: boolean;
}
let watch: Watch | undefined;

function read(key: string, tags: string[] | undefined): Promise<Value> {
  const loader = loaderOf(key);
  return tags ? cache.getOrCompute(key, loader, { ttl: ENTRY_TTL_MS, tags }) : cache.getOrCompute(key, loader, ENTRY_TTL_MS);
}

/** One read of the watched key by `by`; ends the watch once the new value is returned. */
function check(by: string): void {
  const w = watch;
  if (!w || w.done) return;
  const started = nowNs();
  lastLayer = '';
  const pending = read(w.key, w.tags);
  // A hit from the L1 is announced synchronously; anything else went on to Redis.
  const fromL1 = lastLayer === 'l1';
  if (!fromL1 && w.dropped === undefined) {
    w.dropped = started;
    w.by = by;
  }
  pending.then(
    (value) => {
      if (w.done || value.version < w.version) return;
      const ended = nowNs();
      if (w.dropped === undefined) {
        w.dropped = started;
        w.by = by;
      }
      w.fresh ??= ended;
      finish(w, false);
    },
    (err: unknown) => fail(err),
  );
}

function finish(w: Watch, timedOut: boolean): void {
  if (w.done) return;
  w.done = true;
  if (w.timer) clearTimeout(w.timer);
  if (watch === w) watch = undefined;
  send({ event: 'seen', dropped: w.dropped, fresh: w.fresh, by: w.by, timedOut });
}

function afterLibrary(): void {
  if (watch && !watch.done) check('message');
}

function poll(): void {
  const w = watch;
  if (!w || w.done) return;
  if (performance.now() > w.deadline) return finish(w, true);
  check('timer');
  w.timer = setTimeout(poll, POLL_MS);
}

async function arm(msg: { key: string; tags?: string[]; version: number }): Promise<{ event: string } & Record<string, unknown>> {
  const tags = msg.tags;
  // The runs since the key was last armed belong to its previous round (a late one included).
  const previousRuns = runsOf.get(msg.key) ?? [];
  runsOf.delete(msg.key);
  // Reads until the key is answered from the L1 (it is then followed: later announcements reach it).
  const end = performance.now() + 10_000;
  for (;;) {
    lastLayer = '';
    const value = await read(msg.key, tags);
    if (lastLayer === 'l1' && value.version < msg.version) break;
    if (performance.now() > end) throw new Error(`${msg.key} is not answered from the L1 after 10 s (last version ${value.version})`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  versions.set(msg.key, msg.version);
  const warmRuns = runsOf.get(msg.key)?.length ?? 0;
  runsOf.delete(msg.key);
  watch = {
    key: msg.key,
    tags,
    version: msg.version,
    dropped: undefined,
    by: undefined,
    fresh: undefined,
    timer: undefined,
    deadline: performance.now() + WATCH_MS,
    done: false,
  };
  poll();
  return { event: 'armed', previousRuns, warmRuns };
}

async function write(msg: { kind: Kind; key: string; tags?: string[]; version: number }): Promise<{ event: string } & Record<string, unknown>> {
  const call = nowNs();
  switch (msg.kind) {
    case 'invalidate':
      await cache.invalidateTags(msg.tags!);
      break;
    case 'delete':
      await cache.delete(msg.key);
      break;
    case 'set':
      await cache.set(msg.key, { version: msg.version, pid: process.pid } satisfies Value, ENTRY_TTL_MS);
      break;
  }
  const resolved = nowNs();
  return { event: 'written', call, resolved };
  // The writer's own copy is checked at once (its own announcement comes back later).
  check('writer');
}

async function publish(id: number): Promise<{ event: string } & Record<string, unknown>> {
  const call = nowNs();
  await publisher.publish(RAW_CHANNEL, String(id));
  const reply = nowNs();
  return { event: 'published', call, reply };
}

// --- L1 hits ----------------------------------------------------------------------------

interface HitValue {
  id: number;
  name: string;
  tags: string[];
}

type HitMode = 'seq' | 'inflight';

/** `ops` reads one after another, or in 100 lanes that each await their reads in turn. */
async function runReads(fn: () => unknown, mode: HitMode, ops: number, sync: boolean): Promise<void> {
  if (mode === 'seq') {
    if (sync) {
      let found = 0;
      for (let i = 0; i < ops; i++) if (fn() !== undefined) found++;
      if (found !== ops) throw new Error('a synchronous read missed');
      return;
    }
    for (let i = 0; i < ops; i++) await fn();
    return;
  }
  let issued = 0;
  const lane = async () => {
    while (issued < ops) {
      issued++;
      await fn();
    }
  };
  await Promise.all(Array.from({ length: 100 }, lane));
}

/**
 * L1 hit throughput, every contender in this one process on the same key and value, in
 * interleaved slices (the order rotates every slice, so a slow moment of the machine does not
 * favour one contender): after a warm-up, `slices` rounds in which each contender reads in
 * batches of 1000 for `sliceMs`. Answers the ops and ms of every slice.
 */
async function hits(msg: { contenders: string[]; mode: HitMode; slices: number; sliceMs: number; warmup: number }): Promise<{ event: string } & Record<string, unknown>> {
  const key = 'hit:product:1';
  const value: HitValue = { id: 1, name: 'x'.repeat(100), tags: ['a', 'b', 'c'] };
  const load = async () => value;
  const hitCache = createCache({ redis, prefix: 'hits', l1: { max: 1000, ttl: L1_TTL_MS } });
  const lru = new LRUCache<string, HitValue>({ max: 1000 });
  lru.set(key, value);
  const asyncGet = async () => lru.get(key);
  const bento = new BentoCache({ default: 'memory', stores: { memory: bentostore().useL1Layer(memoryDriver({})) } });
  const bentoRaw = new BentoCache({ default: 'memory', stores: { memory: bentostore().useL1Layer(memoryDriver({ serialize: false })) } });
  const fns: Record<string, () => unknown> = {
    'lru-sync': () => lru.get(key),
    'lru-await': asyncGet,
    bento: () => bento.getOrSet({ key, factory: load, ttl: ENTRY_TTL_MS }),
    'bento-raw': () => bentoRaw.getOrSet({ key, factory: load, ttl: ENTRY_TTL_MS }),
    dogpile: () => hitCache.getOrCompute(key, load, ENTRY_TTL_MS),
    'dogpile-tags': () => hitCache.getOrCompute(`${key}:tagged`, load, { ttl: ENTRY_TTL_MS, tags: ['product:1'] }),
    'dogpile-peek': () => hitCache.peek(key),
  };
  // Every contender holds the value before the measurement; dogpile-guard's copies are L1 hits.
  const l1Hit = async (k: string, call: () => unknown) => {
    const end = performance.now() + 10_000;
    for (;;) {
      lastLayer = '';
      let layer = '';
      const listener = (e: { layer: string }) => (layer = e.layer);
      hitCache.on('hit', listener);
      await call();
      hitCache.off('hit', listener);
      if (layer === 'l1') return;
      if (performance.now() > end) throw new Error(`${k} is not answered from the L1 after 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  };
  await l1Hit(key, fns.dogpile!);
  await l1Hit(`${key}:tagged`, fns['dogpile-tags']!);
  await fns.bento!();
  await fns['bento-raw']!();
  const runs = msg.contenders.map((id) => {
    const fn = fns[id];
    if (!fn) throw new Error(`unknown hit contender ${id}`);
    return { id, fn, sync: id === 'lru-sync' || id === 'dogpile-peek', slices: [] as { ops: number; ms: number }[] };
  });
  for (const r of runs) await runReads(r.fn, msg.mode, msg.warmup, r.sync);
  for (let s = 0; s < msg.slices; s++) {
    for (let i = 0; i < runs.length; i++) {
      const r = runs[(i + s) % runs.length]!;
      let ops = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < msg.sliceMs) {
        await runReads(r.fn, msg.mode, 1000, r.sync);
        ops += 1000;
      }
      r.slices.push({ ops, ms: performance.now() - t0 });
    }
  }
  // Still L1 hits at the end (nothing expired or was dropped during the measurement).
  await l1Hit(key, fns.dogpile!);
  await hitCache.close();
  await bento.disconnect();
  await bentoRaw.disconnect();
  return { event: 'hitResult', results: runs.map(({ id, slices }) => ({ id, slices })) };
}

// --- the fleet member ------------------------------------------------------------------

runMember({
  async start() {
    await rawSubscriber.subscribe(RAW_CHANNEL);
    await cache.getOrCompute('bench:coherence:warmup', loaderOf('bench:coherence:warmup'), ENTRY_TTL_MS);
    return {
      commands: {
        arm: (msg) => arm(msg as never),
        collect: async (msg) => {
          const runs = runsOf.get(msg.key as string) ?? [];
          runsOf.delete(msg.key as string);
          return { event: 'collected', runs };
        },
        hits: (msg) => hits(msg as never),
        publish: (msg) => publish(msg.id as number),
        write: (msg) => write(msg as never),
      },
      // `publish` and `write` are answered at once, not behind a command still running.
      immediate: ['publish', 'write'],
      async close() {
        if (watch?.timer) clearTimeout(watch.timer);
        await cache.close().catch(() => {});
        for (const c of [redis, publisher, rawSubscriber]) await c.quit().catch(() => {});
      },
    };
  },
});
