/**
 * One failure rule on direct calls: every failed run of a stored value's refresh (a throw, a
 * hard timeout) holds the key's lead for `failSafeRetry` fleet-wide, with or without
 * `staleIfError`. While it holds, callers inside a stale window get the stale value at once and
 * no process runs the loader; once it is over, the next call refreshes again. A miss with no
 * stored value is not held: its error reaches its callers and the next call runs the loader.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createCache, type CacheResult, type DogpileCache } from '../src/index.js';
import { monotonicNow } from '../src/shared/clock.js';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, type JsonChild } from '../tools/child-process.js';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import type { CallPlan } from '../tools/fleet/plan.js';
import { sleep, waitUntil } from '../tools/basics.js';

const server = useRedis();
const FAIL_SAFE_RETRY = 3000;
let keyN = 0;

const caches: DogpileCache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
});

/** A loader that counts its runs; from `state.fail` on it throws, and with `state.hang` it settles only when its signal aborts. */
function loaderWith() {
  const state = { runs: 0, fail: false, hang: false, failedAt: [] as number[] };
  const loader = async ({ signal }: { signal: AbortSignal }) => {
    const run = ++state.runs;
    if (state.hang) {
      return new Promise<number>((_resolve, reject) => {
        signal.addEventListener('abort', () => {
          state.failedAt.push(monotonicNow());
          reject(signal.reason);
        });
      });
    }
    await sleep(5);
    if (state.fail) {
      state.failedAt.push(monotonicNow());
      throw new TypeError(`run ${run} failed`);
    }
    return run;
  };
  return { state, loader };
}

/** Ten calls, 30 ms apart. */
async function tenCalls(cache: DogpileCache, key: string, loader: ReturnType<typeof loaderWith>['loader']): Promise<{ results: CacheResult<number>[]; at: number[] }> {
  const results: CacheResult<number>[] = [];
  const at: number[] = [];
  for (let i = 0; i < 10; i++) {
    at.push(monotonicNow());
    results.push(await cache.resolve(key, loader, 200));
    await sleep(30);
  }
  return { results, at };
}

const backends = [
  ['in-process cache', () => createCache({ staleWhileRevalidate: '30s', failSafeRetry: FAIL_SAFE_RETRY })],
  ['Redis cache', () => createCache({ redis: server.url, prefix: `h4-${++keyN}:`, staleWhileRevalidate: '30s', failSafeRetry: FAIL_SAFE_RETRY })],
] as const;

describe.each(backends)('a failed refresh holds the key for failSafeRetry without staleIfError (%s)', (_name, make) => {
  it('a refresh loader that throws: 10 calls during failSafeRetry run it once, each answered with the stale value; after failSafeRetry the next call refreshes again', async () => {
    const cache = make();
    caches.push(cache);
    const { state, loader } = loaderWith();
    expect(await cache.resolve('k', loader, 200)).toMatchObject({ status: 'miss', value: 1 });
    await sleep(250);
    state.fail = true;
    const { results, at } = await tenCalls(cache, 'k', loader);
    // Every call was made before the hold could have ended.
    expect(state.failedAt).toHaveLength(1);
    expect(at[9]! - state.failedAt[0]!).toBeLessThan(FAIL_SAFE_RETRY);
    expect(state.runs).toBe(2);
    for (const r of results) expect(r).toMatchObject({ status: 'stale', value: 1 });
    // The calls after the failure were answered stale because of it.
    expect(results.filter((r) => r.staleReason === 'error').length).toBeGreaterThan(0);
    await waitUntil('failSafeRetry is over', () => monotonicNow() - state.failedAt[0]! > FAIL_SAFE_RETRY + 20, FAIL_SAFE_RETRY * 2);
    state.fail = false;
    expect(await cache.resolve('k', loader, 200)).toMatchObject({ status: 'stale', value: 1 });
    await waitUntil('the next refresh ran', () => state.runs === 3);
    await waitUntil('the refreshed value is served', async () => (await cache.resolve('k', loader, 200)).value === 3);
  });

  it('a refresh loader given up by hardTimeout holds the key likewise', async () => {
    const cache = make();
    caches.push(cache);
    const { state, loader } = loaderWith();
    await cache.resolve('k', loader, { ttl: 200, hardTimeout: 100 });
    await sleep(250);
    state.hang = true;
    const results: CacheResult<number>[] = [];
    const at: number[] = [];
    for (let i = 0; i < 10; i++) {
      at.push(monotonicNow());
      results.push(await cache.resolve('k', loader, { ttl: 200, hardTimeout: 100 }));
      await sleep(30);
    }
    expect(state.failedAt).toHaveLength(1);
    expect(at[9]! - state.failedAt[0]!).toBeLessThan(FAIL_SAFE_RETRY);
    expect(state.runs).toBe(2);
    for (const r of results) expect(r).toMatchObject({ status: 'stale', value: 1 });
  });

  it('a caller for whom the held value is past every stale window waits for the hold to end, then refreshes, without looking again in a loop', async () => {
    const cache = make();
    caches.push(cache);
    const { state, loader } = loaderWith();
    await cache.resolve('k', loader, 200);
    await sleep(250);
    state.fail = true;
    expect(await cache.resolve('k', loader, 200)).toMatchObject({ status: 'stale', value: 1 });
    await waitUntil('the refresh failed', () => state.failedAt.length === 1);
    state.fail = false;
    let coalesced = 0;
    cache.on('coalesced', () => coalesced++);
    // No staleWhileRevalidate for this call: the stored value is no answer for it, and the hold
    // stands (no run before it ends); it waits like for a leader, then leads the refresh.
    const own = await cache.resolve('k', loader, { ttl: 200, staleWhileRevalidate: 0 });
    expect(own).toMatchObject({ status: 'miss', value: 3 });
    expect(monotonicNow() - state.failedAt[0]!).toBeGreaterThanOrEqual(FAIL_SAFE_RETRY - 50);
    expect(coalesced).toBeLessThanOrEqual(2);
  });

  it('a miss with no stored value is not held: its error reaches the caller, the next call runs the loader', async () => {
    const cache = make();
    caches.push(cache);
    const { state, loader } = loaderWith();
    state.fail = true;
    await expect(cache.resolve('k', loader, 200)).rejects.toThrow(TypeError);
    state.fail = false;
    expect(await cache.resolve('k', loader, 200)).toMatchObject({ status: 'miss', value: 2 });
  });
});

describe('a failed refresh holds the key across processes', () => {
  const fleets: Fleet[] = [];
  afterEach(async () => {
    await Promise.all(fleets.splice(0).map((f) => f.close()));
    await killAllChildren();
  });
  afterAll(async () => {
    await killAllChildren();
  });

  interface Record {
    ok: boolean;
    at: number;
    latency: number;
    status?: string;
    reason?: string;
    run?: number;
  }
  const runOn = async (w: JsonChild, plan: CallPlan) => (await launch<Record>([w], plan, { timeoutMs: 60_000, leadMs: 0 })[0]!).records;
  const call = async (w: JsonChild) => (await runOn(w, { mode: 'burst', calls: 1 }))[0]!;

  it('two processes on one Redis, no staleIfError: after one process\'s refresh failed, neither runs the loader again before failSafeRetry', async () => {
    const key = `h4-fleet-${++keyN}`;
    const fleet = await Fleet.start('get-or-compute', 2, {
      url: server.url,
      client: 'ioredis',
      modes: true,
      key,
      ttl: 200,
      loaderMs: 5,
      cache: { staleWhileRevalidate: '30s', failSafeRetry: FAIL_SAFE_RETRY },
    });
    fleets.push(fleet);
    const [a, b] = fleet.members as [JsonChild, JsonChild];
    const redis = server.client();
    expect(await call(a)).toMatchObject({ ok: true, status: 'miss', run: 1 });
    await sleep(250);
    await redis.set(`${key}:mode`, 'fail');
    // a's call finds the value stale and refreshes it in the background: the refresh fails.
    expect(await call(a)).toMatchObject({ ok: true, status: 'stale', run: 1 });
    await waitUntil('the refresh failed', async () => (await redis.llen(`${key}:log`)) === 1);
    // The loader's throw is logged before its commit: wait for the hold ('F:' + token) on the key's lock.
    await waitUntil('the failed refresh holds the key', async () => {
      for (const name of await redis.keys(`*${key}*`)) if ((await redis.type(name)) === 'string' && (await redis.get(name))?.startsWith('F:')) return true;
      return false;
    });
    const failedAt = performance.now();
    const records: Record[] = [];
    for (let i = 0; i < 10; i++) {
      records.push(await call(i % 2 === 0 ? b : a));
      await sleep(30);
    }
    expect(performance.now() - failedAt).toBeLessThan(FAIL_SAFE_RETRY);
    expect(Number(await redis.get(`${key}:runs`))).toBe(2);
    for (const r of records) expect(r).toMatchObject({ ok: true, status: 'stale', reason: 'error', run: 1 });
    // Once the hold is over, the next call (in the other process) refreshes again.
    await sleep(Math.max(0, failedAt + FAIL_SAFE_RETRY + 100 - performance.now()));
    await redis.set(`${key}:mode`, 'ok');
    expect(await call(b)).toMatchObject({ ok: true, status: 'stale', run: 1 });
    await waitUntil('the next refresh ran', async () => Number(await redis.get(`${key}:runs`)) === 3);
  });
});
