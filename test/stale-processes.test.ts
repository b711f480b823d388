/**
 * The freshness lifecycle across processes (staleWhileRevalidate, staleIfError with
 * failSafeRetry, soft and hard timeouts, earlyRefresh), proven with real Node processes on
 * one real Redis. "No call waits for a loader" is judged by each call's status (hit or
 * stale) and by order: while each refresh ran, calls started and were answered, with an older
 * value (no latency ceiling, which a loaded machine could break or a retry could hide).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, type JsonChild } from '../tools/child-process.js';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import { monotonicMs, type CallPlan } from '../tools/fleet/plan.js';
import { waitUntil } from '../tools/basics.js';

interface CallRecord {
  ok: boolean;
  at: number;
  latency: number;
  status?: string;
  reason?: string;
  run?: number;
  createdAt?: number;
  name?: string;
  code?: string;
  causeName?: string;
}

interface RunLog {
  run: number;
  start: number;
  end: number;
  mode: string;
}

const server = useRedis();
let redis: Redis;
let keyN = 0;

beforeAll(() => {
  redis = server.client();
});
const fleets: Fleet[] = [];
afterEach(async () => {
  await Promise.all(fleets.splice(0).map((f) => f.close()));
  await killAllChildren();
});
afterAll(async () => {
  await killAllChildren();
});

/** `count` processes of the get-or-compute scenario whose loader reads its mode from Redis and logs its runs. */
async function startWorkers(count: number, config: Record<string, unknown>): Promise<JsonChild[]> {
  const fleet = await Fleet.start('get-or-compute', count, { url: server.url, client: 'ioredis', modes: true, ...config });
  fleets.push(fleet);
  return fleet.members;
}

async function runOn(w: JsonChild, plan: CallPlan): Promise<CallRecord[]> {
  return (await launch<CallRecord>([w], plan, { timeoutMs: 60_000, leadMs: 0 })[0]!).records;
}

const call = async (w: JsonChild) => (await runOn(w, { mode: 'burst', calls: 1 }))[0]!;
const loop = (w: JsonChild, durationMs: number, intervalMs = 20) => runOn(w, { mode: 'open', durationMs, intervalMs });

/** Resolves once this process's loader starts run `run` (the fleet-wide run number). */
async function leading(w: JsonChild, run: number, timeoutMs = 45_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await w.take('loader', Math.max(1, deadline - performance.now()))).run !== run);
}

async function runLog(key: string): Promise<RunLog[]> {
  return (await redis.lrange(`${key}:log`, 0, -1)).map((l) => JSON.parse(l) as RunLog).sort((a, b) => a.start - b.start);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * No caller waited for a refresh: for each refresh run that ended while the calls went on,
 * calls were started and answered inside it, with the value of an earlier run.
 */
function expectAnsweredWhileRefreshing(calls: CallRecord[], refreshes: RunLog[]): void {
  const lastAnswer = Math.max(...calls.map((r) => r.at + r.latency));
  const checked = refreshes.filter((run) => run.end < lastAnswer);
  expect(checked.length).toBeGreaterThan(0);
  for (const run of checked) {
    const during = calls.filter((r) => r.at >= run.start && r.at + r.latency < run.end);
    expect(during.length, `calls answered while run ${run.run} loaded`).toBeGreaterThan(0);
    for (const r of during) expect(r.run!).toBeLessThan(run.run);
  }
}

/** Each run started after the previous one ended: one refresh at a time, fleet-wide. */
function expectOneAtATime(log: RunLog[]): void {
  for (let i = 1; i < log.length; i++) expect(log[i]!.start).toBeGreaterThanOrEqual(log[i - 1]!.end);
}

describe('staleWhileRevalidate across processes', () => {
  it('4 processes on a hot key (ttl 500 ms, staleWhileRevalidate 5 s, 5 s): one loader run per expiry fleet-wide, and no call after the first fill waits for a loader', async () => {
    const key = `swr-${++keyN}`;
    const ttl = 500;
    const loaderMs = 600;
    const workers = await startWorkers(4, { key, ttl, loaderMs, cache: { staleWhileRevalidate: '5s', lockTtl: 3000 } });
    const fill = await call(workers[0]!);
    expect(fill.status).toBe('miss');
    const all = (await Promise.all(workers.map((w) => loop(w, 5000)))).flat();
    await sleep(loaderMs + 300); // let the last refresh finish
    const log = await runLog(key);
    const runs = Number(await redis.get(`${key}:runs`));
    expect(runs).toBe(log.length);
    // Refresh cycles: a value lives ttl, then one refresh of loaderMs replaces it: each run
    // starts only after the previous run's value expired (never two in one cycle), fleet-wide.
    for (let i = 1; i < log.length; i++) expect(log[i]!.start).toBeGreaterThanOrEqual(log[i - 1]!.end + ttl - 25);
    expect(log.length).toBeGreaterThanOrEqual(4); // it did refresh, cycle after cycle
    expect(log.length).toBeLessThanOrEqual(1 + Math.ceil(5000 / (ttl + loaderMs)) + 1);
    // no call waits for a loader: every answer is a hit or a stale value, far quicker than the loader
    expect(all.filter((r) => !r.ok)).toEqual([]);
    expect(new Set(all.map((r) => r.status))).toEqual(new Set(['hit', 'stale']));
    expect(all.filter((r) => r.status === 'stale').every((r) => r.reason === 'revalidate')).toBe(true);
    expectAnsweredWhileRefreshing(all, log.slice(1));
    // the refreshed values replaced the old ones: calls saw every run's value
    expect(new Set(all.map((r) => r.run)).size).toBeGreaterThanOrEqual(log.length - 1);
  });

  it('while another process refreshes, a process answers the stale value without asking Redis again at every call, and takes the new value once it is announced', async () => {
    const key = `swr-elsewhere-${++keyN}`;
    const loaderMs = 1500;
    // A lock TTL far longer than the test's bounds: only the refresh's announcement can end
    // the stale answers in time.
    const [a, b] = await startWorkers(2, { key, ttl: 300, loaderMs, cache: { staleWhileRevalidate: '20s', lockTtl: 10_000 } });
    expect((await call(a!)).status).toBe('miss');
    await sleep(400);
    expect(await call(a!)).toMatchObject({ status: 'stale', run: 1 });
    await leading(a!, 2, 10_000);
    const scripts = async () => {
      const info = await redis.info('commandstats');
      return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const before = await scripts();
    const during = await loop(b!, 400, 10);
    const lookups = (await scripts()) - before;
    expect(during.length).toBeGreaterThanOrEqual(20);
    expect(during.every((r) => r.ok && r.status === 'stale' && r.reason === 'revalidate' && r.run === 1)).toBe(true);
    // The first lookup follows the key's channel; one sent once it is live lets the rest be
    // answered from memory (one lookup per call before).
    expect(lookups, `lookup scripts run for ${during.length} calls`).toBeLessThanOrEqual(4);
    // The process running the refresh answers its own later calls the same way: it follows the
    // key's channel from the first of them (that call asks Redis), and one lookup sent once the
    // channel is live confirms no write came between its lead and then (a write ends the stale
    // answers); the rest come from memory.
    const beforeOwn = await scripts();
    const own = await loop(a!, 200, 10);
    expect(own.every((r) => r.ok && r.status === 'stale' && r.run === 1)).toBe(true);
    expect((await scripts()) - beforeOwn, `lookup scripts run for ${own.length} calls in the refreshing process`).toBeLessThanOrEqual(2);
    // The refresh is announced: the next calls get its value, long before the lock would run out.
    await waitUntil('the refresh to be logged', async () => (await runLog(key)).some((l) => l.run === 2), 10_000);
    await waitUntil('the new value in the other process', async () => (await call(b!)).run === 2, 2_000);
  });

  it('SIGKILL of the process running a background refresh: another process refreshes after the lock TTL, and no caller waits meanwhile', async () => {
    const key = `swr-kill-${++keyN}`;
    const loaderMs = 1500;
    const lockTtl = 1000;
    const workers = await startWorkers(4, { key, ttl: 300, loaderMs, cache: { staleWhileRevalidate: '20s', lockTtl } });
    await call(workers[0]!);
    await sleep(400);
    const loops = workers.map((w) => loop(w, 5000).catch(() => undefined));
    const refresher = await Promise.race(workers.map((w) => leading(w, 2, 20_000).then(() => w)));
    refresher.kill('SIGKILL');
    const killedAt = monotonicMs();
    const survivors = (await Promise.all(loops)).filter((r): r is CallRecord[] => r !== undefined).flat();
    const log = await runLog(key);
    // run 2 died with its process; run 3 started once the dead refresher's lock ran out
    const third = log.find((l) => l.run === 3);
    expect(third).toBeDefined();
    expect(third!.start).toBeGreaterThanOrEqual(killedAt - 50);
    expect(log.filter((l) => l.run === 2)).toEqual([]);
    expect(survivors.length).toBeGreaterThan(0);
    expect(survivors.filter((r) => !r.ok)).toEqual([]);
    expect(new Set(survivors.map((r) => r.status)).has('miss')).toBe(false);
    expect(survivors.every((r) => r.status === 'hit' || r.status === 'stale')).toBe(true);
    // Nobody waited for run 3 either (nor for the dead run 2: nothing could have answered it).
    expectAnsweredWhileRefreshing(survivors, [third!]);
    expect(survivors.some((r) => r.run === 3)).toBe(true);
  });
});

describe('earlyRefresh with staleWhileRevalidate across processes', () => {
  for (const beta of [1, 2, 4]) {
    it(`β = ${beta}: refreshes start before expiry, one at a time fleet-wide, and no caller waits after the first fill`, async () => {
      const key = `early-${beta}-${++keyN}`;
      const ttl = 1000;
      const loaderMs = 400;
      const workers = await startWorkers(4, { key, ttl, loaderMs, cache: { staleWhileRevalidate: '10s', earlyRefresh: { beta }, lockTtl: 3000 } });
      await call(workers[0]!);
      const all = (await Promise.all(workers.map((w) => loop(w, 5000)))).flat();
      await sleep(loaderMs + 300);
      const log = await runLog(key);
      expectOneAtATime(log);
      // refreshes start before the value they replace expires (the value of run i is stored at its end)
      const early = log.slice(1).filter((l, i) => l.start < log[i]!.end + ttl).length;
      expect(early).toBeGreaterThan(0);
      expect(all.filter((r) => !r.ok)).toEqual([]);
      expect(all.every((r) => r.status === 'hit' || r.status === 'stale')).toBe(true);
      expectAnsweredWhileRefreshing(all, log.slice(1));
      const stale = all.filter((r) => r.status === 'stale').length;
      console.log(
        `earlyRefresh β=${beta}: ${log.length - 1} refreshes (${early} started before expiry), ${all.length} calls, ` +
          `stale share ${((100 * stale) / all.length).toFixed(2)}%`,
      );
    });
  }
});

describe('staleIfError and failSafeRetry across processes', () => {
  it('the loader starts throwing: callers keep the stale value without error until the window ends, attempts are throttled, then the error surfaces', async () => {
    const key = `failsafe-${++keyN}`;
    const ttl = 300;
    const staleIfError = 3000;
    const failSafeRetry = 500;
    const workers = await startWorkers(4, { key, ttl, loaderMs: 50, cache: { staleIfError, failSafeRetry } });
    const fill = await call(workers[0]!);
    expect(fill.status).toBe('miss');
    await redis.set(`${key}:mode`, 'fail');
    const all = (await Promise.all(workers.map((w) => loop(w, ttl + staleIfError + 1200, 25)))).flat();
    const windowEnd = fill.createdAt! + ttl + staleIfError;
    const inWindow = all.filter((r) => r.at + r.latency < windowEnd - 100);
    const after = all.filter((r) => r.at > windowEnd + 300);
    expect(inWindow.length).toBeGreaterThan(100);
    expect(inWindow.filter((r) => !r.ok)).toEqual([]);
    expect(inWindow.every((r) => r.run === 1)).toBe(true);
    const stale = inWindow.filter((r) => r.status === 'stale');
    expect(stale.length).toBeGreaterThan(0);
    expect(stale.every((r) => r.reason === 'error')).toBe(true);
    // the window is over: the error reaches the callers
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((r) => !r.ok)).toBe(true);
    // attempts inside the window: about one per failSafeRetry fleet-wide, not one per call
    const attempts = (await runLog(key)).filter((l) => l.mode === 'fail' && l.start < windowEnd);
    console.log(`fail-safe: ${attempts.length} refresh attempts in a ${staleIfError} ms window (failSafeRetry ${failSafeRetry} ms), ${inWindow.length} calls served`);
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.length).toBeLessThanOrEqual(Math.ceil(staleIfError / failSafeRetry) + 1);
    expectOneAtATime(attempts);
  });
});

describe('softTimeout and hardTimeout across processes', () => {
  it('softTimeout 100 ms with a 2 s loader: callers get the stale value after ~100 ms; the background result is stored and the next call gets it', async () => {
    const key = `soft-${++keyN}`;
    const [a, b] = await startWorkers(2, { key, ttl: 1000, loaderMs: 2000, cache: { staleIfError: '30s', softTimeout: 100 } });
    const fill = await call(a!);
    expect(fill.run).toBe(1);
    await sleep(1100);
    const [ra, rb] = await Promise.all([call(a!), call(b!)]);
    await expect.poll(() => redis.llen(`${key}:log`), { timeout: 10_000 }).toBe(2);
    const second = (await runLog(key))[1]!;
    for (const r of [ra!, rb!]) {
      expect(r.status).toBe('stale');
      expect(r.reason).toBe('timeout');
      expect(r.run).toBe(1);
      expect(r.latency).toBeGreaterThanOrEqual(95);
      // Answered while the 2 s loader still ran, not when it ended.
      expect(r.at + r.latency).toBeLessThan(second.end);
    }
    await sleep(100);
    const next = await call(b!);
    expect(next.status).toBe('hit');
    expect(next.run).toBe(2);
    expect(Number(await redis.get(`${key}:runs`))).toBe(2);
  });

  it('hardTimeout with a loader that never settles: every caller is answered at the timeout, the signal aborts, another process leads at once', async () => {
    const key = `hard-${++keyN}`;
    const hardTimeout = 500;
    const [a, b] = await startWorkers(2, { key, ttl: 60_000, loaderMs: 50, cache: { hardTimeout, lockTtl: 20_000 } });
    await redis.set(`${key}:mode`, 'hang');
    const first = call(a!);
    await leading(a!, 1);
    const waiter = call(b!);
    const [ra, rb] = await Promise.all([first, waiter]);
    expect(ra).toMatchObject({ ok: false, name: 'LoaderTimeoutError', code: 'E_LOADER_TIMEOUT' });
    expect(rb).toMatchObject({ ok: false, code: 'E_LOADER', causeName: 'LoaderTimeoutError' });
    // The loader never settles: without hardTimeout nobody would be answered. The bound is
    // the claim, made generous (10 times the timeout) for a loaded machine.
    for (const r of [ra, rb]) expect(r.latency).toBeLessThan(hardTimeout * 10);
    await expect.poll(() => redis.get(`${key}:aborted`)).toBe('1');
    // the lock (20 s) was released at the timeout: another process leads now
    await redis.set(`${key}:mode`, 'ok');
    const next = await call(b!);
    expect(next).toMatchObject({ ok: true, status: 'miss', run: 2 });
    // The bound is the claim: led at once, not after the 20 s lock ran out (a quarter of it,
    // generous for a loaded machine).
    expect(next.latency).toBeLessThan(5000);
  });

  it('hardTimeout with a stale value under staleIfError: the callers get the stale value at the timeout', async () => {
    const key = `hard-stale-${++keyN}`;
    const [a, b] = await startWorkers(2, { key, ttl: 200, loaderMs: 50, cache: { hardTimeout: 400, staleIfError: '30s', lockTtl: 20_000 } });
    await call(a!);
    await sleep(300);
    await redis.set(`${key}:mode`, 'hang');
    const first = call(a!);
    await leading(a!, 2);
    const [ra, rb] = await Promise.all([first, call(b!)]);
    for (const r of [ra, rb]) expect(r).toMatchObject({ ok: true, status: 'stale', reason: 'error', run: 1 });
  });
});
