/**
 * Observability: the `dogpile-guard:*` tracing channels (in the processes of a real
 * cross-process stampede), the OpenTelemetry entry with the SDK's in-memory exporters, the
 * Prometheus entry with a real prom-client registry, and the NODE_DEBUG log.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import type { AddressInfo } from 'node:net';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import express from 'express';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { createCache, InvalidOptionError, RedisLock, type DogpileCache } from '../src/index.js';
import { instrumentDogpile } from '../src/otel/index.js';
import { registerDogpileMetrics } from '../src/prometheus/index.js';
import { getOrComputeChannel, loaderChannel } from '../src/shared/diagnostics.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { killAllChildren } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import { get } from '../tools/http-client.js';
import { RedisServer } from '../tools/redis-server.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();
let keyN = 0;
const uniq = (label: string) => `${label}-${++keyN}-${process.pid}`;

afterEach(killAllChildren);
afterAll(killAllChildren);

/** Two caches on one Redis (two "processes" as far as the protocol goes), `perCache` concurrent calls on each. */
async function stampede(key: string, perCache: number, loaderMs: number): Promise<{ statuses: string[]; runs: number }> {
  const caches = [createCache({ redis: server.client() }), createCache({ redis: server.client() })];
  let runs = 0;
  const loader = async () => {
    runs++;
    await sleep(loaderMs);
    return 'value';
  };
  const all = await Promise.all(caches.flatMap((cache) => Array.from({ length: perCache }, () => cache.resolve(key, loader, 60_000))));
  await Promise.all(caches.map((c) => c.close()));
  return { statuses: all.map((r) => r.status), runs };
}

function count<T>(items: T[], pick: (t: T) => unknown, value: unknown): number {
  return items.filter((t) => pick(t) === value).length;
}

describe('tracing channels', () => {
  it('across processes: each process sees its calls (one miss in all, the rest coalesced) and the one loader run with its duration', async () => {
    const key = uniq('herd');
    const loaderMs = 1500;
    const fleet = await Fleet.start(
      'get-or-compute',
      4,
      { url: server.url, client: 'ioredis', key, loaderMs, api: 'getOrCompute', trace: true, cache: { lockTtl: 5000, waitTimeout: 30_000 } },
      { env: { ...process.env, NODE_DEBUG: 'dogpile-guard' } },
    );
    const workers = fleet.members;
    type Report = { results: { run: number }[]; events: Record<string, Record<string, unknown>[]> };
    const reports: Report[] = (await Promise.all(fleet.launch<{ run: number }>({ mode: 'burst', calls: 10 }, { timeoutMs: 40_000 }))).map((r) => ({ results: r.records, events: r.events as Report['events'] }));
    await fleet.close();

    const ends = reports.flatMap((r) => r.events['getOrCompute.asyncEnd'] ?? []);
    expect(ends).toHaveLength(40);
    expect(ends.every((e) => e.key === key && e.degraded === false && typeof e.duration === 'number')).toBe(true);
    expect(count(ends, (e) => e.outcome, 'miss')).toBe(1);
    expect(count(ends, (e) => e.outcome, 'coalesced')).toBe(39);
    // every call: start, end, asyncStart, asyncEnd once; no error
    for (const event of ['start', 'end', 'asyncStart']) expect(reports.flatMap((r) => r.events[`getOrCompute.${event}`] ?? [])).toHaveLength(40);
    expect(reports.flatMap((r) => r.events['getOrCompute.error'] ?? [])).toHaveLength(0);

    const loaders = reports.flatMap((r) => r.events['loader.asyncEnd'] ?? []);
    expect(loaders).toHaveLength(1);
    expect(loaders[0]).toMatchObject({ key, background: false, degraded: false });
    expect(loaders[0]!.duration as number).toBeGreaterThanOrEqual(loaderMs - 50);
    expect(reports.flatMap((r) => r.results.map((v) => v.run))).toEqual(Array(40).fill(1));

    // the leader's process ran the loader and saw the miss
    const leader = reports.findIndex((r) => (r.events['loader.asyncEnd'] ?? []).length === 1);
    expect(count(reports[leader]!.events['getOrCompute.asyncEnd']!, (e) => e.outcome, 'miss')).toBe(1);
    // NODE_DEBUG=dogpile-guard: the leader logged its lead and load, the others their wait and wake
    expect(workers[leader]!.stderr).toMatch(new RegExp(`DOGPILE-GUARD \\d+: lead key=${key}`));
    expect(workers[leader]!.stderr).toMatch(new RegExp(`loaded key=${key} in \\d+ ms`));
    for (const [i, w] of workers.entries()) {
      if (i === leader) continue;
      expect(w.stderr).toMatch(new RegExp(`wait key=${key}: another process leads`));
      expect(w.stderr).toMatch(new RegExp(`wake key=${key} after \\d+ ms: the leader announced`));
    }
  });

  it('in one process: a hit from process memory is layer l1 (or the embedded store), a failed loader publishes error', async () => {
    const seen: Record<string, unknown>[] = [];
    const errors: unknown[] = [];
    const noop = () => {};
    const subscribers = {
      start: noop,
      end: noop,
      asyncStart: noop,
      asyncEnd: (ctx: object) => void seen.push({ ...ctx }),
      error: (ctx: { error?: unknown }) => void errors.push(ctx.error),
    };
    getOrComputeChannel.subscribe(subscribers);
    const memory = createCache();
    const l1 = createCache({ redis: server.client(), l1: { max: 100, ttl: 10_000 } });
    try {
      const key = uniq('layers');
      await memory.getOrCompute(key, () => 1, 10_000);
      await memory.getOrCompute(key, () => 2, 10_000);
      await l1.getOrCompute(key, () => 1, 10_000);
      // A copy is served from the L1 once the key's channel is followed: hits from Redis until then.
      await waitUntil('a hit from the L1', async () => {
        await l1.getOrCompute(key, () => 2, 10_000);
        return seen.at(-1)?.layer === 'l1';
      }, 5_000);
      const boom = new Error('boom');
      await expect(memory.getOrCompute(uniq('fail'), () => Promise.reject(boom), 10_000)).rejects.toBe(boom);
      const layers = seen.map((c) => [c.outcome, c.layer]);
      expect(layers.slice(0, 3)).toEqual([
        ['miss', undefined],
        ['hit', 'store'],
        ['miss', undefined],
      ]);
      expect(layers.slice(3, -2).every(([outcome, layer]) => outcome === 'hit' && layer === 'store')).toBe(true);
      expect(layers.slice(-2)).toEqual([
        ['hit', 'l1'],
        [undefined, undefined],
      ]);
      expect(errors).toEqual([boom]);
    } finally {
      getOrComputeChannel.unsubscribe(subscribers);
      await memory.close();
      await l1.close();
    }
  });

  it('a hit from process memory stays synchronous when traced: its events are published before getOrCompute returns', async () => {
    const events: string[] = [];
    const subscribers = {
      start: () => events.push('start'),
      end: () => events.push('end'),
      asyncStart: () => events.push('asyncStart'),
      asyncEnd: () => events.push('asyncEnd'),
      error: () => events.push('error'),
    };
    const cache = createCache();
    const key = uniq('sync');
    await cache.getOrCompute(key, () => 'v', 10_000);
    getOrComputeChannel.subscribe(subscribers);
    try {
      const pending = cache.getOrCompute(key, () => 'other', 10_000);
      expect(events).toEqual(['start', 'end', 'asyncStart', 'asyncEnd']);
      expect(await pending).toBe('v');
    } finally {
      getOrComputeChannel.unsubscribe(subscribers);
      await cache.close();
    }
  });

  it('the HTTP guard publishes on dogpile-guard:http with the outcome of each request', async () => {
    const seen: Record<string, unknown>[] = [];
    const channel = tracingChannel('dogpile-guard:http');
    const subscribers = { asyncEnd: (ctx: unknown) => seen.push({ ...(ctx as object) }) };
    channel.subscribe(subscribers as never);
    const cache = createCache();
    const app = express();
    app.use(dogpileGuard({ cache, ttl: 10_000 }));
    app.get('/page', (_req, res) => {
      res.send('page');
    });
    const http = app.listen(0, '127.0.0.1');
    try {
      await new Promise((r) => http.once('listening', r));
      const port = (http.address() as AddressInfo).port;
      expect((await get(port, '/page')).xCache).toBe('MISS');
      expect((await get(port, '/page')).xCache).toBe('HIT');
      expect(seen.map((c) => [c.method, c.outcome])).toEqual([
        ['GET', 'miss'],
        ['GET', 'hit'],
      ]);
      expect(String(seen[0]!.key)).toContain('/page');
    } finally {
      channel.unsubscribe(subscribers as never);
      await new Promise((r) => http.close(r));
      await cache.close();
    }
  });

  it('with nobody listening, nothing is published and getOrCompute keeps its fast path', async () => {
    expect(getOrComputeChannel.hasSubscribers).toBe(false);
    expect(loaderChannel.hasSubscribers).toBe(false);
    const dispose = instrumentDogpile({ tracerProvider: new BasicTracerProvider(), meterProvider: new MeterProvider() });
    expect(getOrComputeChannel.hasSubscribers).toBe(true);
    dispose();
    expect(getOrComputeChannel.hasSubscribers).toBe(false);
    const metrics = registerDogpileMetrics({ registry: new Registry() });
    expect(loaderChannel.hasSubscribers).toBe(true);
    metrics.dispose();
    expect(loaderChannel.hasSubscribers).toBe(false);
  });
});

describe('dogpile-guard/otel', () => {
  let spans: InMemorySpanExporter;
  let tracerProvider: BasicTracerProvider;
  let metricExporter: InMemoryMetricExporter;
  let reader: PeriodicExportingMetricReader;
  let meterProvider: MeterProvider;
  let dispose: () => void;
  const contextManager = new AsyncLocalStorageContextManager();

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
  });
  afterAll(() => {
    context.disable();
  });

  beforeEach(() => {
    spans = new InMemorySpanExporter();
    tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 600_000 });
    meterProvider = new MeterProvider({ readers: [reader] });
    dispose = instrumentDogpile({ tracerProvider, meterProvider, keyGroup: (key) => key.split('-')[0]! });
  });
  afterEach(async () => {
    dispose();
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
  });

  async function collected(): Promise<Map<string, MetricData>> {
    await reader.forceFlush();
    const byName = new Map<string, MetricData>();
    const last = metricExporter.getMetrics().at(-1);
    for (const scope of last?.scopeMetrics ?? []) for (const m of scope.metrics) byName.set(m.descriptor.name, m);
    return byName;
  }

  const named = (name: string): ReadableSpan[] => spans.getFinishedSpans().filter((s) => s.name === name);

  it('after a stampede: one cache.getOrCompute span per call, the loader span a child of the call that led, metric points by outcome', async () => {
    const key = uniq('herd');
    const tracer = tracerProvider.getTracer('test');
    const { statuses, runs } = await tracer.startActiveSpan('request', async (request) => {
      try {
        return await stampede(key, 5, 300);
      } finally {
        request.end();
      }
    });
    expect(runs).toBe(1);
    expect(count(statuses, (s) => s, 'miss')).toBe(1);

    const [request] = named('request');
    const calls = named('cache.getOrCompute');
    expect(calls).toHaveLength(10);
    // nested under the caller's active span; keys left out, their group recorded
    expect(calls.every((s) => s.parentSpanContext?.spanId === request!.spanContext().spanId)).toBe(true);
    expect(calls.every((s) => s.attributes['dogpile_guard.key_group'] === 'herd' && !Object.values(s.attributes).includes(key))).toBe(true);
    const missCall = calls.filter((s) => s.attributes['dogpile_guard.outcome'] === 'miss');
    expect(missCall).toHaveLength(1);
    expect(count(calls, (s) => s.attributes['dogpile_guard.outcome'], 'coalesced')).toBe(9);
    const [loader] = named('cache.loader');
    expect(named('cache.loader')).toHaveLength(1);
    expect(loader!.parentSpanContext?.spanId).toBe(missCall[0]!.spanContext().spanId);
    expect(loader!.attributes).toMatchObject({ 'dogpile_guard.background': false, 'dogpile_guard.degraded': false });
    expect(loader!.attributes['dogpile_guard.loader.duration_ms'] as number).toBeGreaterThanOrEqual(250);

    const metrics = await collected();
    const points = metrics.get('dogpile_guard.calls')!.dataPoints.map((p) => [p.attributes.outcome, p.attributes.layer, p.attributes['dogpile_guard.key_group'], p.value]);
    expect(points).toEqual(
      expect.arrayContaining([
        ['miss', 'none', 'herd', 1],
        ['coalesced', 'none', 'herd', 9],
      ]),
    );
    const loaderHistogram = metrics.get('dogpile_guard.loader.duration')!;
    expect(loaderHistogram.descriptor.unit).toBe('s');
    expect(loaderHistogram.dataPoints).toHaveLength(1);
    expect((loaderHistogram.dataPoints[0]!.value as { count: number; sum: number }).count).toBe(1);
    expect((loaderHistogram.dataPoints[0]!.value as { count: number; sum: number }).sum).toBeGreaterThanOrEqual(0.25);
    expect((metrics.get('dogpile_guard.wait.duration')!.dataPoints[0]!.value as { count: number }).count).toBe(9);
  });

  it('with Redis down: the calls are degraded, the loader span says so, and Redis errors are counted', async () => {
    const own = await new RedisServer().start();
    const cache = createCache({ redis: own.client({ maxRetriesPerRequest: 1, enableOfflineQueue: false }), commandTimeout: 200, backendCooldown: 60_000 });
    try {
      const key = uniq('down');
      await own.kill();
      const results = await Promise.all(Array.from({ length: 3 }, () => cache.resolve(key, () => 'local', 60_000)));
      expect(results.every((r) => r.degraded)).toBe(true);
      const calls = named('cache.getOrCompute');
      expect(calls).toHaveLength(3);
      expect(calls.every((s) => s.attributes['dogpile_guard.degraded'] === true)).toBe(true);
      expect(named('cache.loader').map((s) => s.attributes['dogpile_guard.degraded'])).toEqual([true]);
      const metrics = await collected();
      const errors = metrics.get('dogpile_guard.redis.errors')!.dataPoints;
      expect(errors.reduce((n, p) => n + (p.value as number), 0)).toBeGreaterThanOrEqual(1);
      expect(errors[0]!.attributes.operation).toBeTypeOf('string');
    } finally {
      await cache.close();
      await own.stop();
    }
  });

  it('after a fail-safe: the call span says stale and fail-safe, and the fail_safe counter counts it', async () => {
    const cache = createCache({ staleIfError: '30s' });
    try {
      const key = uniq('safe');
      let fail = false;
      const loader = () => {
        if (fail) throw new Error('database down');
        return 'v1';
      };
      await cache.getOrCompute(key, loader, 100);
      await sleep(150);
      fail = true;
      const result = await cache.resolve(key, loader, 100);
      expect(result).toMatchObject({ value: 'v1', status: 'stale', staleReason: 'error' });
      const last = named('cache.getOrCompute').at(-1)!;
      expect(last.attributes).toMatchObject({ 'dogpile_guard.outcome': 'stale', 'dogpile_guard.fail_safe': true });
      const metrics = await collected();
      const failSafe = metrics.get('dogpile_guard.fail_safe')!.dataPoints;
      expect(failSafe.reduce((n, p) => n + (p.value as number), 0)).toBe(1);
      expect(metrics.get('dogpile_guard.calls')!.dataPoints.some((p) => p.attributes.outcome === 'stale')).toBe(true);
    } finally {
      await cache.close();
    }
  });

  it('records cache.lock spans for RedisLock acquisitions', async () => {
    const name = uniq('lock');
    const a = new RedisLock(server.client(), name, { ttl: 5000 });
    const b = new RedisLock(server.client(), name, { ttl: 5000 });
    const token = await a.acquire();
    expect(await b.tryAcquire()).toBe(false);
    await a.release();
    const locks = named('cache.lock');
    expect(locks.map((s) => [s.attributes['dogpile_guard.lock.operation'], s.attributes['dogpile_guard.lock.acquired']])).toEqual([
      ['acquire', true],
      ['tryAcquire', false],
    ]);
    expect(locks[0]!.attributes['dogpile_guard.lock.fencing_token']).toBe(token);
  });

  it('rejects a keyGroup that is not a function', () => {
    expect(() => instrumentDogpile({ keyGroup: 'x' as never })).toThrow(InvalidOptionError);
  });
});

describe('dogpile-guard/prometheus', () => {
  it('a scrape of the registry after a stampede and with Redis down', async () => {
    const registry = new Registry();
    const metrics = registerDogpileMetrics({ registry });
    let cache: DogpileCache | undefined;
    const own = await new RedisServer().start();
    try {
      await stampede(uniq('herd'), 5, 300);
      cache = createCache({ redis: own.client({ maxRetriesPerRequest: 1, enableOfflineQueue: false }), commandTimeout: 200, backendCooldown: 60_000 });
      await own.kill();
      await cache.getOrCompute(uniq('down'), () => 'local', 60_000);
      const text = await registry.metrics();
      expect(text).toContain('# TYPE dogpile_guard_calls_total counter');
      expect(text).toContain('dogpile_guard_calls_total{outcome="miss",layer="none"} 2');
      expect(text).toContain('dogpile_guard_calls_total{outcome="coalesced",layer="none"} 9');
      expect(text).toMatch(/dogpile_guard_loader_duration_seconds_count\{background="false",outcome="ok"\} 2/);
      expect(text).toMatch(/dogpile_guard_wait_duration_seconds_count 9/);
      expect(text).toMatch(/dogpile_guard_redis_errors_total\{operation="[a-z]+"\} [1-9]/);
      expect(text).toContain('# TYPE dogpile_guard_refreshes_total counter');
      expect(text).toContain('# TYPE dogpile_guard_fail_safe_total counter');
    } finally {
      metrics.dispose();
      await cache?.close();
      await own.stop();
    }
    expect(await registry.metrics()).not.toContain('dogpile_guard_');
  });

  it('a scrape after a fail-safe counts it and the stale call', async () => {
    const registry = new Registry();
    const metrics = registerDogpileMetrics({ registry });
    const cache = createCache({ staleIfError: '30s' });
    try {
      const key = uniq('safe');
      let fail = false;
      const loader = () => {
        if (fail) throw new Error('database down');
        return 'v1';
      };
      await cache.getOrCompute(key, loader, 100);
      await sleep(150);
      fail = true;
      expect(await cache.getOrCompute(key, loader, 100)).toBe('v1');
      const text = await registry.metrics();
      expect(text).toMatch(/dogpile_guard_fail_safe_total 1\b/);
      expect(text).toMatch(/dogpile_guard_calls_total\{outcome="stale",layer="[a-z]+"\} 1\b/);
    } finally {
      metrics.dispose();
      await cache.close();
    }
  });

  it('rejects a bad prefix or buckets, naming the option', () => {
    expect(() => registerDogpileMetrics({ registry: new Registry(), prefix: 'bad-prefix' })).toThrow(/prefix/);
    expect(() => registerDogpileMetrics({ registry: new Registry(), buckets: [] })).toThrow(/buckets/);
  });
});

describe('NODE_DEBUG=dogpile-guard and the freshness lifecycle', () => {
  it('logs a stale value served and the background refresh that replaces it', async () => {
    const { execFile } = await import('node:child_process');
    const { fileURLToPath } = await import('node:url');
    const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url));
    const script = `
      const { createCache } = await import(${JSON.stringify(entry)});
      const cache = createCache({ staleWhileRevalidate: '5s' });
      const load = async () => { await new Promise((r) => setTimeout(r, 50)); return Date.now(); };
      await cache.getOrCompute('k', load, 100);
      await new Promise((r) => setTimeout(r, 150));
      await cache.getOrCompute('k', load, 100);
      await new Promise((r) => setTimeout(r, 300));
      await cache.close();
    `;
    const stderr = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env: { ...process.env, NODE_DEBUG: 'dogpile-guard' }, timeout: 30_000 }, (error, _out, err) =>
        error ? reject(error) : resolve(err),
      );
    });
    expect(stderr).toMatch(/stale key=k: a stale value served \(revalidate\)/);
    expect(stderr).toMatch(/refresh key=k started/);
    expect(stderr).toMatch(/refresh key=k ended after \d+ ms: stored/);
  });
});
