/**
 * Child process of `bench/coalesce.bench.ts`: measures one contender in a fresh process and
 * prints one result line (`@@ {...}`), then exits.
 *
 *   node --expose-gc --import tsx bench/coalesce-worker.ts coalesce <contender> <callers> <repeats> <redis url> <build> [<baseline build>]
 *   node --expose-gc --import tsx bench/coalesce-worker.ts hits <opsSeq> <opsInFlight> <rounds> <redis url> <build> [<baseline build>]
 *
 * `<build>`: dogpile-guard's `src/index.ts` bundled to one ES module (as the package ships it,
 * built by the parent), so that it runs as compiled JavaScript like the peers in node_modules.
 * tsx compiles the sources with `keepNames`, which wraps every named closure created per call
 * in a `__name()` call; the hits also measure the sources run that way, for comparison.
 *
 * `coalesce`: N callers of one cold key whose loader waits on a gate. Garbage is collected
 * twice before the calls and twice once they are made (and the loader runs), before the gate
 * opens: the heap grown in between, divided by N, is what a waiting caller holds. Then the
 * time from opening the gate to the last caller answered. Every round is followed, in the same
 * process, by a bare fan-out (N `gate.then(v => v)`) timed the same way.
 *
 * `hits`: Redis hits (no L1) through `getOrCompute`, against a bare ioredis `getBuffer` plus
 * `v8.deserialize` of the same bytes, one read at a time and 100 in flight on distinct keys, in
 * interleaved slices.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { createCache as createAcd } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { createCache } from '../src/index.js';

/** The part of a build's API used here (a build's types are its own). */
interface PlainCache {
  getOrCompute(key: string, loader: () => Promise<unknown>, ttl: number): Promise<unknown>;
  close(): Promise<void>;
}
interface DogpileModule {
  createCache(options?: { redis?: Redis; prefix?: string }): PlainCache;
}

const [task, ...args] = process.argv.slice(2);

function send(msg: unknown): void {
  process.stdout.write(`@@ ${JSON.stringify(msg)}\n`);
}

async function connect(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* surfaced through the failing calls */
  });
  await client.connect();
  return client;
}

async function importBuild(file: string | undefined): Promise<DogpileModule> {
  if (!file) throw new Error('this contender needs a build of a baseline checkout (COALESCE_BENCH_BASELINE)');
  return (await import(pathToFileURL(path.resolve(file)).href)) as DogpileModule;
}

/** Collects garbage twice (the parent starts workers with --expose-gc). */
function settleHeap(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  gc();
  gc();
}

const heapUsed = () => v8.getHeapStatistics().used_heap_size;

interface Value {
  id: number;
  name: string;
}
const VALUE: Value = { id: 42, name: 'product 42' };
const TTL_MS = 600_000;
/** Bound on the wait for the leader's loader to start, and for every caller to be answered. */
const WAIT_MS = 20_000;

/**
 * One contender of the coalescing measurement. `call` makes the i-th call of a round; `gate`
 * is what the loader returns. References (`ref: true`) have no loader: they measure what the
 * harness itself allocates, or a bare fan-out.
 */
interface Coalescer {
  call(key: string, gate: Promise<Value>, started: () => void): unknown;
  /** Nothing settles: this reference only allocates (no timing). */
  inert?: boolean;
  /** No loader: nothing to wait for before the second collection. */
  noLoader?: boolean;
  close(): Promise<void>;
}

/** Set before each round: what async-cache-dedupe's defined function answers. */
let acdRound: { gate: Promise<Value>; started: () => void } | undefined;

async function makeCoalescer(name: string, url: string, build: string, baselineBuild: string | undefined): Promise<Coalescer> {
  const plain = (cache: PlainCache, after: () => Promise<unknown> = async () => {}): Coalescer => ({
    // The loader is a closure per caller, as an application's would be; only the leader's runs.
    call: (key, gate, started) =>
      cache.getOrCompute(
        key,
        () => {
          started();
          return gate;
        },
        TTL_MS,
      ),
    close: async () => {
      await cache.close();
      await after();
    },
  });
  switch (name) {
    case 'dogpile':
      return plain((await importBuild(build)).createCache());
    case 'dogpile-redis': {
      const client = await connect(url);
      return plain((await importBuild(build)).createCache({ redis: client }), () => client.quit());
    }
    case 'dogpile@base':
      return plain((await importBuild(baselineBuild)).createCache());
    case 'dogpile-redis@base': {
      const client = await connect(url);
      return plain((await importBuild(baselineBuild)).createCache({ redis: client, prefix: 'dogbase' }), () => client.quit());
    }
    case 'acd': {
      const fetcher = createAcd({ ttl: TTL_MS / 1000 }).define('fetch', (_key: string) => {
        acdRound!.started();
        return acdRound!.gate;
      }) as unknown as { fetch(key: string): Promise<Value> };
      return {
        call: (key, gate, started) => {
          acdRound = { gate, started };
          return fetcher.fetch(key);
        },
        close: async () => {},
      };
    }
    case 'bento': {
      const bento = new BentoCache({ default: 'memory', stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 100_000 })) } });
      return {
        call: (key, gate, started) =>
          bento.getOrSet({
            key,
            factory: () => {
              started();
              return gate;
            },
            ttl: TTL_MS,
          }),
        close: () => bento.disconnect(),
      };
    }
    case 'bare':
      return { call: (_key, gate) => gate.then((v) => v), noLoader: true, close: async () => {} };
    case 'harness-closure':
      // What the harness holds per caller of a plain cache: the loader closure it passes (kept
      // here in the result slot) and the slot.
      return {
        call: (_key, gate, started) => () => {
          started();
          return gate;
        },
        inert: true,
        close: async () => {},
      };
    case 'harness-slot':
      return { call: () => VALUE, inert: true, close: async () => {} };
    default:
      throw new Error(`unknown contender ${name}`);
  }
}

interface RoundResult {
  /** Heap bytes per caller between the two collections. */
  bytes: number;
  /** Milliseconds from opening the gate to the last caller answered (NaN for inert references). */
  ms: number;
}

/** Waits for `flag()` on the event loop, bounded. */
async function until(what: string, flag: () => boolean): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!flag()) {
    if (performance.now() > deadline) throw new Error(`no ${what} within ${WAIT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

async function coalesceRound(c: Coalescer, key: string, n: number): Promise<RoundResult> {
  let open!: (v: Value) => void;
  const gate = new Promise<Value>((resolve) => (open = resolve));
  let started = false;
  const markStarted = () => {
    started = true;
  };
  // What the previous round left (its timers, its last promise jobs) is let go of first.
  await new Promise((resolve) => setTimeout(resolve, 20));
  settleHeap();
  const before = heapUsed();
  const results = new Array<unknown>(n);
  for (let i = 0; i < n; i++) results[i] = c.call(key, gate, markStarted);
  // The leader's loader runs once its lookup answered (at once in process, a round trip on Redis).
  if (!c.inert && !c.noLoader) await until('loader start', () => started);
  settleHeap();
  const bytes = (heapUsed() - before) / n;
  if (c.inert) {
    open(VALUE);
    return { bytes, ms: Number.NaN };
  }
  const ms = await fanIn(results as Promise<unknown>[], () => open(VALUE));
  return { bytes, ms };
}

/** Attaches one counter to every result, runs `release`, and returns the ms until all settled. */
function fanIn(results: Promise<unknown>[], release: () => void): Promise<number> {
  return new Promise((resolve, reject) => {
    let left = results.length;
    let t0 = 0;
    const timer = setTimeout(() => reject(new Error(`${left} callers not answered within ${WAIT_MS} ms`)), WAIT_MS);
    const tick = (v: unknown) => {
      if ((v as Value | undefined)?.id !== VALUE.id) return reject(new Error('a caller got another value'));
      if (--left === 0) {
        const ms = performance.now() - t0;
        clearTimeout(timer);
        resolve(ms);
      }
    };
    for (const p of results) p.then(tick, reject);
    t0 = performance.now();
    release();
  });
}

/** A bare fan-out of `n` in this process, timed like a contender's round. */
function bareFanOut(n: number): Promise<number> {
  let open!: (v: Value) => void;
  const gate = new Promise<Value>((resolve) => (open = resolve));
  const results = new Array<Promise<Value>>(n);
  for (let i = 0; i < n; i++) results[i] = gate.then((v) => v);
  settleHeap();
  return fanIn(results, () => open(VALUE));
}

async function coalesce(): Promise<void> {
  const [name, callers, repeats, url, build, baselineBuild] = args as [string, string, string, string, string, string | undefined];
  const n = Number(callers);
  const c = await makeCoalescer(name, url, build, baselineBuild);
  // Warm-up: the first calls of a fresh process compile the paths measured below.
  for (let w = 0; w < 5; w++) {
    await coalesceRound(c, `warm:${w}`, n);
    await bareFanOut(n);
  }
  const bytes: number[] = [];
  const ms: number[] = [];
  const bareMs: number[] = [];
  for (let r = 0; r < Number(repeats); r++) {
    // The contender and the bare fan-out trade places every other round.
    if (r % 2 === 1) bareMs.push(await bareFanOut(n));
    const result = await coalesceRound(c, `cold:${r}`, n);
    bytes.push(result.bytes);
    ms.push(result.ms);
    if (r % 2 === 0) bareMs.push(await bareFanOut(n));
  }
  await c.close();
  send({ ev: 'coalesce', name, bytes, ms: c.inert ? [] : ms, bareMs });
}

// --- hits -------------------------------------------------------------------------------

type Read = (slot: number) => Promise<unknown>;

/** `ops` reads: one after another on key 0, or 100 lanes in flight, each on its own key. */
async function runReads(fn: Read, inFlight: boolean, ops: number): Promise<void> {
  if (!inFlight) {
    for (let i = 0; i < ops; i++) await fn(0);
    return;
  }
  let issued = 0;
  const lane = async (slot: number) => {
    while (issued < ops) {
      issued++;
      await fn(slot);
    }
  };
  await Promise.all(Array.from({ length: 100 }, (_, slot) => lane(slot)));
}

async function hits(): Promise<void> {
  const [opsSeq, opsInFlight, rounds, url, build, baselineBuild] = args as [string, string, string, string, string, string | undefined];
  const client = await connect(url);
  const keys = Array.from({ length: 100 }, (_, i) => `hit:${i}`);
  const value = { id: 42, name: 'product 42', price: 19.99, tags: ['kitchen', 'steel', 'sale'], description: 'A sturdy kettle. '.repeat(10) };
  const load = async () => value;
  const ours = (await importBuild(build)).createCache({ redis: client });
  // The same sources run by tsx (their values under the same keys: the same bytes).
  const sources = createCache({ redis: client });
  const base = baselineBuild ? (await importBuild(baselineBuild)).createCache({ redis: client, prefix: 'dogbase' }) : undefined;
  for (const key of keys) {
    await ours.getOrCompute(key, load, TTL_MS);
    await sources.getOrCompute(key, load, TTL_MS);
    await base?.getOrCompute(key, load, TTL_MS);
  }
  // The bare read fetches exactly the bytes dogpile-guard stored (its header skipped).
  const valueKeys = keys.map((k) => `dogpile:v:{${k}}`);
  const stored = await client.getBuffer(valueKeys[0]!);
  if (!stored) throw new Error('dogpile-guard did not store the warm value');
  const probe = v8.deserialize(stored.subarray(20)) as typeof value;
  if (probe.description !== value.description) throw new Error('the stored value does not decode after a 20-byte header');
  if (base) {
    const bytes = await client.getBuffer(`dogbase:v:{${keys[0]!}}`);
    // The stored formats may differ (the baseline's release may write another entry format or serializer): both sizes are reported.
    if (!bytes) throw new Error('the baseline did not store the warm value');
    console.error(`stored bytes: ours ${stored.length}, the baseline ${bytes.length}`);
  }
  const contenders: { id: string; fn: Read }[] = [
    {
      id: 'raw',
      fn: async (slot) => {
        const bytes = await client.getBuffer(valueKeys[slot]!);
        return bytes === null ? undefined : v8.deserialize(bytes.subarray(20));
      },
    },
    { id: 'dogpile', fn: (slot) => ours.getOrCompute(keys[slot]!, load, TTL_MS) },
    { id: 'dogpile-tsx', fn: (slot) => sources.getOrCompute(keys[slot]!, load, TTL_MS) },
    ...(base ? [{ id: 'dogpile@base', fn: (slot: number) => base.getOrCompute(keys[slot]!, load, TTL_MS) }] : []),
  ];
  const out: Record<string, Record<string, number[]>> = {};
  for (const inFlight of [false, true]) {
    const mode = inFlight ? 'inflight' : 'seq';
    const ops = Number(inFlight ? opsInFlight : opsSeq);
    const rates: Record<string, number[]> = {};
    for (const c of contenders) {
      rates[c.id] = [];
      await runReads(c.fn, inFlight, ops);
    }
    settleHeap();
    for (let r = 0; r < Number(rounds); r++) {
      for (let i = 0; i < contenders.length; i++) {
        const c = contenders[(i + r) % contenders.length]!;
        const t0 = performance.now();
        await runReads(c.fn, inFlight, ops);
        rates[c.id]!.push((ops / (performance.now() - t0)) * 1000);
      }
    }
    out[mode] = rates;
  }
  await ours.close();
  await sources.close();
  await base?.close();
  await client.quit();
  send({ ev: 'hits', bytes: stored.length, rates: out });
}

try {
  if (task === 'coalesce') await coalesce();
  else if (task === 'hits') await hits();
  else throw new Error(`unknown task ${task}`);
  process.exit(0);
} catch (error) {
  send({ ev: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
}
