/**
 * Fleet scenario: `cache.resolve(key, loader, ttl)` of one key through a DogpileCache on a
 * shared Redis (or Redis Cluster), each call recorded as `{ value, status, reason, run,
 * createdAt }` (see ../member.ts for the rest of the record; `createdAt` is moved onto the
 * fleet's monotonic clock, so it compares with the records' `at`).
 *
 * Config:
 * - `url` (or `cluster`: startup nodes), `key`, `loaderMs`, `ttl` (default 60 s);
 * - `cache`: the cache's options (`createCache({ redis, ...cache })`);
 * - `client`: `library` (default: the client the test run selected, DOGPILE_TEST_CLIENT) or
 *   `ioredis`;
 * - `fail`: the loader throws a TypeError; `share`: results are shared but not stored
 *   (`cacheable: () => 'share'`); `padBytes`: the value carries a pad that big (the record
 *   reports `padBytes`, not the pad);
 * - `api`: `resolve` (default) or `getOrCompute` (the record then has `value` and `run` only);
 * - `trace`: the process subscribes to the `dogpile-guard:getOrCompute` and `:loader` tracing
 *   channels; `done` then carries `events`: per channel and event name (`getOrCompute.asyncEnd`),
 *   the context fields of each message published during the run;
 * - `waits`: the process sends `waiting { key }` when a call finds another process leading (the
 *   cache's remote `coalesced` event);
 * - `modes`: the loader reads its behaviour from `<key>:mode` at each run (ok | fail | hang),
 *   so a test switches it fleet-wide, appends `{ run, start, end, mode }` (on the fleet's
 *   monotonic clock) to the list `<key>:log` when it settles, and a run whose signal aborts
 *   increments `<key>:aborted`.
 *
 * The loader counts its runs with INCR on `<key>:runs` (outside the cache's namespace, on its
 * own connection) and sends `loader { run }` as it starts, so a test can kill the leader mid-loader.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { Cluster, Redis } from 'ioredis';
import { createCache, type CacheOptions } from '../../../src/index.js';
import { closeClient, type RedisClient } from '../../../src/redis/client.js';
import { IoRedis, libraryClient } from '../../test-client.js';
import { runMember } from '../member.js';
import { monotonicMs } from '../plan.js';

interface Config {
  url: string;
  cluster?: { host: string; port: number }[];
  key: string;
  loaderMs: number;
  ttl?: number;
  cache?: CacheOptions;
  client?: 'library' | 'ioredis';
  fail?: boolean;
  share?: boolean;
  padBytes?: number;
  modes?: boolean;
  api?: 'resolve' | 'getOrCompute';
  trace?: boolean;
  waits?: boolean;
}

type Fields = Record<string, unknown>;

/** Records what the library's tracing channels publish in this process, per `<channel>.<event>`. */
function traceEvents(): Record<string, Fields[]> {
  const events: Record<string, Fields[]> = {};
  const snapshot = (ctx: object): Fields => {
    const { result: _r, error, ...fields } = ctx as Fields;
    return error === undefined ? fields : { ...fields, error: String(error) };
  };
  for (const name of ['getOrCompute', 'loader']) {
    const channel = tracingChannel(`dogpile-guard:${name}`);
    const record = (event: string) => (ctx: unknown) => (events[`${name}.${event}`] ??= []).push(snapshot(ctx as object));
    channel.subscribe({ start: record('start'), end: record('end'), asyncStart: record('asyncStart'), asyncEnd: record('asyncEnd'), error: record('error') });
  }
  return events;
}

interface Value {
  pid: number;
  run: number;
  pad?: string;
}

runMember<Config>({
  async start(config, ctx) {
    const redis: RedisClient = config.cluster ? new Cluster(config.cluster) : config.client === 'ioredis' ? new Redis(config.url) : await libraryClient(config.url);
    const counter = config.cluster ? new Cluster(config.cluster) : new IoRedis.Redis(config.url);
    const cache = createCache({ redis, ...config.cache });
    cache.on('backendError', () => {});
    if (config.waits) cache.on('coalesced', (e) => e.remote && ctx.emit('waiting', { key: e.key }));
    const key = config.key;

    const loader = async ({ signal }: { signal: AbortSignal }): Promise<Value> => {
      const start = monotonicMs();
      const mode = config.modes ? ((await counter.get(`${key}:mode`)) ?? 'ok') : 'ok';
      const run = await counter.incr(`${key}:runs`);
      ctx.loaderRan();
      ctx.emit('loader', { run });
      if (config.modes) signal.addEventListener('abort', () => void counter.incr(`${key}:aborted`), { once: true });
      if (mode === 'hang') return new Promise<never>(() => {});
      await new Promise((r) => setTimeout(r, config.loaderMs));
      if (config.modes) await counter.rpush(`${key}:log`, JSON.stringify({ run, start, end: monotonicMs(), mode }));
      if (config.fail || mode === 'fail') throw new TypeError(`loader failed in ${process.pid}`);
      return config.padBytes === undefined ? { pid: process.pid, run } : { pid: process.pid, run, pad: 'x'.repeat(config.padBytes) };
    };
    const options = { ttl: config.ttl ?? 60_000, ...(config.share ? { cacheable: () => 'share' as const } : {}) };

    const events = config.trace ? traceEvents() : undefined;

    await counter.ping();
    return {
      beforeRun() {
        if (events) for (const name of Object.keys(events)) delete events[name];
      },
      report() {
        return events ? { events } : {};
      },
      async call() {
        if (config.api === 'getOrCompute') {
          const { pad: _pad, ...value } = await cache.getOrCompute(key, loader, options);
          return { value, run: value.run };
        }
        const r = await cache.resolve(key, loader, options);
        const { pad, ...value } = r.value;
        return {
          value: pad === undefined ? value : { ...value, padBytes: pad.length },
          status: r.status,
          reason: r.staleReason,
          run: r.value.run,
          // The library's wall-clock time, moved onto the fleet's clock so it compares with `at`.
          createdAt: r.createdAt + (monotonicMs() - Date.now()),
        };
      },
      async close() {
        await cache.close();
        await closeClient(redis);
        counter.disconnect();
      },
    };
  },
});
