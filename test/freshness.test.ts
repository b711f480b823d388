/**
 * The freshness lifecycle inside one process: the embedded store, Redis with and without L1,
 * Redis stopped, option validation, and the entry format version 2 byte pins. The claims
 * across processes are in stale-processes.test.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, jsonSerializer, LoaderTimeoutError, v8Serializer, errors, type CacheResult } from '../src/index.js';
import { decodeEntry, encodeEntry, EntryKind, HEADER_SIZE_V2 } from '../src/store/entry.js';
import { EntryCodec } from '../src/store/codec.js';
import { useRedis } from './support/use-redis.js';
import { startRedis } from '../tools/redis-server.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { CREATED_AT, DELTA, jsonValue, STALE, TTL, v8Value } from './fixtures/formats/samples.js';
import { getOrComputeChannel, loaderChannel } from '../src/shared/diagnostics.js';

const server = useRedis();
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'formats');
const sample = (name: string) => readFileSync(path.join(dir, name));

function counter(value: (n: number) => unknown = (n) => n, ms = 50) {
  const state = { runs: 0, fail: false };
  const loader = async () => {
    const n = ++state.runs;
    await sleep(ms);
    if (state.fail) throw new TypeError(`failed run ${n}`);
    return value(n);
  };
  return { state, loader };
}

describe('options of the freshness lifecycle', () => {
  const bad: [Record<string, unknown>, string][] = [
    [{ staleWhileRevalidate: -1 }, 'staleWhileRevalidate'],
    [{ staleWhileRevalidate: Number.NaN }, 'staleWhileRevalidate'],
    [{ staleIfError: Number.POSITIVE_INFINITY }, 'staleIfError'],
    [{ staleIfError: '-5s' }, 'staleIfError'],
    [{ failSafeRetry: 0 }, 'failSafeRetry'],
    [{ softTimeout: -10 }, 'softTimeout'],
    [{ hardTimeout: Number.NaN }, 'hardTimeout'],
    [{ earlyRefresh: { beta: 0 } }, 'earlyRefresh.beta'],
    [{ earlyRefresh: { beta: -1 } }, 'earlyRefresh.beta'],
    [{ earlyRefresh: { beta: Number.POSITIVE_INFINITY } }, 'earlyRefresh.beta'],
    [{ earlyRefresh: 'yes' }, 'earlyRefresh'],
    [{ softTimeout: 500, hardTimeout: 500 }, 'softTimeout'],
    [{ softTimeout: 600, hardTimeout: 500 }, 'softTimeout'],
  ];
  for (const [options, option] of bad) {
    it(`${JSON.stringify(options)} throws InvalidOptionError naming ${option}, on createCache and per call, with nothing written`, async () => {
      const thrown = (fn: () => unknown) => {
        try {
          fn();
        } catch (error) {
          return error;
        }
        return undefined;
      };
      const atCreate = thrown(() => createCache(options as never));
      expect(atCreate).toBeInstanceOf(InvalidOptionError);
      expect((atCreate as InvalidOptionError).option).toBe(option);
      const redis = server.client();
      const cache = createCache({ redis });
      const key = freshId('bad');
      let runs = 0;
      const error = await cache.resolve(key, () => ++runs, { ttl: 1000, ...options }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe(option);
      expect(runs).toBe(0);
      expect(await redis.exists(`dogpile:v:{${key}}`, `dogpile:l:{${key}}`)).toBe(0);
      await cache.close();
    });
  }

  it('LoaderTimeoutError is exported with code E_LOADER_TIMEOUT and in the errors map', () => {
    expect(errors.LoaderTimeoutError).toBe(LoaderTimeoutError);
    expect(new LoaderTimeoutError('x').code).toBe('E_LOADER_TIMEOUT');
  });
});

describe('the embedded store follows the same rules in process', () => {
  it('staleWhileRevalidate: 50 concurrent callers of an expired value get it at once; one refresh runs; the next call gets the new value', async () => {
    const cache = createCache({ staleWhileRevalidate: '5s' });
    const { state, loader } = counter((n) => n, 200);
    const refreshes: unknown[] = [];
    cache.on('refresh', (e) => refreshes.push(e));
    expect((await cache.resolve('k', loader, 1000)).value).toBe(1);
    await sleep(1100);
    const stale = await Promise.all(Array.from({ length: 50 }, () => cache.resolve('k', loader, 1000)));
    // Answered while the refresh still runs: its start was reported, its end not yet.
    expect(refreshes).toHaveLength(1);
    expect(stale.every((r) => r.status === 'stale' && r.staleReason === 'revalidate' && r.value === 1)).toBe(true);
    await waitUntil('the refresh to end', () => refreshes.length === 2, 5_000);
    expect(await cache.resolve('k', loader, 1000)).toMatchObject({ status: 'hit', value: 2 });
    expect(state.runs).toBe(2);
    expect(refreshes).toEqual([{ key: 'k', phase: 'start' }, expect.objectContaining({ key: 'k', phase: 'end', outcome: 'stored' })]);
  });

  it('staleIfError + failSafeRetry: a failing loader is served around with the stale value, one attempt per failSafeRetry, then the error surfaces', async () => {
    const failSafeRetry = 300;
    const cache = createCache({ staleIfError: 2000, failSafeRetry });
    const { state, loader } = counter((n) => n, 10);
    const attempts: number[] = [];
    const timed = async () => {
      attempts.push(performance.now());
      return loader();
    };
    const failSafe: unknown[] = [];
    cache.on('failSafe', (e) => failSafe.push(e));
    await cache.resolve('k', timed, 100);
    const windowEnd = performance.now() + 100 + 2000;
    state.fail = true;
    await sleep(120);
    const served: CacheResult<unknown>[] = [];
    // Calls every 10 ms until three refresh attempts failed (the first at once, then one per failSafeRetry).
    while (attempts.length < 4) {
      served.push(await cache.resolve('k', timed, 100));
      await sleep(10);
    }
    expect(served.every((r) => r.status === 'stale' && r.staleReason === 'error' && r.value === 1)).toBe(true);
    expect(failSafe.length).toBe(served.length);
    // Far more calls than attempts, and the attempts at least failSafeRetry apart (a lower bound: a slow machine only spaces them more).
    expect(served.length).toBeGreaterThan(attempts.length);
    for (let i = 2; i < attempts.length; i++) expect(attempts[i]! - attempts[i - 1]!).toBeGreaterThanOrEqual(failSafeRetry - 2);
    await sleep(Math.max(0, windowEnd - performance.now()) + 50); // the window (ttl + staleIfError) is over
    await expect(cache.resolve('k', timed, 100)).rejects.toThrow(TypeError);
  });
});

describe('hardTimeout bounds every loader run, the local ones too', () => {
  /**
   * A loader that rejects with its signal's reason when the signal aborts, else resolves 'late'
   * after 2 s (twenty times the hardTimeout of these calls): a run hardTimeout does not reach.
   */
  function hangingLoader() {
    const seen: { signal?: AbortSignal } = {};
    let release: () => void = () => {};
    const loader = ({ signal }: { signal: AbortSignal }) => {
      seen.signal = signal;
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => resolve('late'), 2000);
        release = () => clearTimeout(timer);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason);
        }, { once: true });
      });
    };
    return { seen, loader, release: () => release() };
  }

  it("a caller's own run after its waitTimeout (onWaitTimeout: 'load') is aborted by hardTimeout with LoaderTimeoutError", async () => {
    const cache = createCache();
    const loaderErrors: unknown[] = [];
    cache.on('loaderError', ({ error }) => loaderErrors.push(error));
    cache.on('waitTimeout', () => {});
    const key = freshId('local-hard');
    let openLead: (v: string) => void = () => {};
    const lead = cache.getOrCompute(key, () => new Promise<string>((resolve) => (openLead = resolve)), 60_000);
    const own = hangingLoader();
    const timedOut = cache.getOrCompute(key, own.loader, { ttl: 60_000, waitTimeout: 20, onWaitTimeout: 'load', hardTimeout: 100 });
    const outcome = await timedOut.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    own.release();
    expect(outcome).toMatchObject({ error: expect.any(LoaderTimeoutError) });
    expect(own.seen.signal?.aborted).toBe(true);
    expect(own.seen.signal?.reason).toBeInstanceOf(LoaderTimeoutError);
    expect(loaderErrors.some((e) => e instanceof LoaderTimeoutError)).toBe(true);
    openLead('lead');
    expect(await lead).toBe('lead');
    await cache.close();
  });

  it('a degraded run while Redis is unreachable is aborted by hardTimeout with LoaderTimeoutError', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client({ maxRetriesPerRequest: 0, enableOfflineQueue: false }), commandTimeout: 200, backendCooldown: 60_000 });
    cache.on('backendError', () => {});
    cache.on('loaderError', () => {});
    await own.kill();
    const key = freshId('degraded-hard');
    const run = hangingLoader();
    const outcome = await cache.getOrCompute(key, run.loader, { ttl: 60_000, hardTimeout: 100 }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    run.release();
    expect(outcome).toMatchObject({ error: expect.any(LoaderTimeoutError) });
    expect(run.seen.signal?.reason).toBeInstanceOf(LoaderTimeoutError);
    await cache.close();
    await own.stop();
  });
});

describe('diagnostics channels', () => {
  it('a stale answer is traced with outcome stale (failSafe when its refresh failed), and the background refresh as a background loader run', async () => {
    const calls: Record<string, unknown>[] = [];
    const loads: Record<string, unknown>[] = [];
    const noop = () => {};
    const onCall = { start: noop, end: noop, asyncStart: noop, error: noop, asyncEnd: (ctx: object) => void calls.push({ ...ctx }) };
    const onLoad = { start: noop, end: noop, asyncStart: noop, error: noop, asyncEnd: (ctx: object) => void loads.push({ ...ctx }) };
    getOrComputeChannel.subscribe(onCall);
    loaderChannel.subscribe(onLoad);
    const cache = createCache({ staleWhileRevalidate: '10s', staleIfError: '10s' });
    try {
      const { state, loader } = counter((n) => n, 20);
      let ended = 0;
      cache.on('refresh', (e) => e.phase === 'end' && ended++);
      await cache.resolve('k', loader, 100);
      await sleep(150);
      state.fail = true;
      await cache.resolve('k', loader, 100);
      await waitUntil('the refresh to fail', () => ended === 1, 5_000);
      await cache.resolve('k', loader, 100);
      expect(calls.map((c) => [c.outcome, c.failSafe])).toEqual([
        ['miss', false],
        ['stale', false],
        ['stale', true],
      ]);
      expect(loads.map((l) => l.background)).toEqual([false, true]);
    } finally {
      getOrComputeChannel.unsubscribe(onCall);
      loaderChannel.unsubscribe(onLoad);
      await cache.close();
    }
  });
});

describe('Redis and L1', () => {
  it('the Redis key of an entry lives until the end of its longest stale window', async () => {
    const redis = server.client();
    const cache = createCache({ redis, staleWhileRevalidate: '10s', staleIfError: '60s' });
    const key = freshId('px');
    await cache.getOrCompute(key, () => 'v', 1000);
    const pttl = await redis.pttl(`dogpile:v:{${key}}`);
    expect(pttl).toBeGreaterThan(60_000);
    expect(pttl).toBeLessThanOrEqual(61_000);
    await cache.close();
  });

  it('with L1 on, a stale value is served under staleIfError while Redis is stopped; past the window the loader error surfaces', async () => {
    const own = await startRedis();
    const client = own.client({ maxRetriesPerRequest: 1, enableOfflineQueue: false });
    const cache = createCache({ redis: client, l1: true, staleIfError: 1500, commandTimeout: 200, backendCooldown: 100 });
    cache.on('backendError', () => {});
    const key = freshId('down');
    const { state, loader } = counter((n) => n, 10);
    expect((await cache.resolve(key, loader, 200)).value).toBe(1);
    await own.kill();
    state.fail = true;
    await sleep(300);
    const during = await Promise.all(Array.from({ length: 5 }, () => cache.resolve(key, loader, 200)));
    for (const r of during) expect(r).toMatchObject({ status: 'stale', staleReason: 'error', value: 1, degraded: true });
    expect(state.runs).toBe(1);
    await sleep(1800);
    await expect(cache.resolve(key, loader, 200)).rejects.toThrow(TypeError);
    await cache.close();
    await own.stop();
  });

  it('with L1 on, staleWhileRevalidate serves the stale value and one refresh replaces it', async () => {
    const cache = createCache({ redis: server.client(), l1: true, staleWhileRevalidate: '5s' });
    const key = freshId('l1swr');
    const { state, loader } = counter((n) => n, 100);
    let ended = 0;
    cache.on('refresh', (e) => e.phase === 'end' && ended++);
    await cache.resolve(key, loader, 1000);
    await sleep(1100);
    const stale = await Promise.all(Array.from({ length: 20 }, () => cache.resolve(key, loader, 1000)));
    expect(stale.every((r) => r.status === 'stale' && r.value === 1)).toBe(true);
    await waitUntil('the refresh to end', () => ended === 1, 5_000);
    expect(await cache.resolve(key, loader, 1000)).toMatchObject({ status: 'hit', value: 2 });
    expect(state.runs).toBe(2);
    await cache.close();
  });
});

describe('stored entry format v2', () => {
  it('decodes a value entry with a stale window and Δ, written with jsonSerializer, and today writes the same bytes', () => {
    const bytes = sample('entry-json-value.v2.bin');
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 2, 1]);
    const entry = decodeEntry(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA });
    expect(bytes.readDoubleBE(12)).toBe(CREATED_AT + TTL);
    expect(bytes.readDoubleBE(20)).toBe(CREATED_AT + TTL + STALE);
    expect(jsonSerializer.deserialize(entry.payload)).toEqual(jsonValue());
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, jsonSerializer.serialize(jsonValue()), { stale: STALE, delta: DELTA }).equals(bytes)).toBe(true);
  });

  it('decodes a v8 value entry v2 through the codec', () => {
    const bytes = sample('entry-v8-value.v2.bin');
    const entry = new EntryCodec(v8Serializer).decode(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA });
    expect((entry as { value: ReturnType<typeof v8Value> }).value.text).toBe(v8Value().text);
    expect(bytes.length - HEADER_SIZE_V2).toBe(v8Serializer.serialize(v8Value()).length);
  });

  it('v1 entries keep decoding, as entries with no stale window', () => {
    for (const name of ['entry-v8-value.v1.bin', 'entry-json-value.v1.bin', 'entry-hit-for-miss.v1.bin']) {
      const entry = decodeEntry(sample(name));
      expect(entry.stale).toBe(0);
      expect(entry.delta).toBe(0);
    }
  });

  it('an entry without a stale window or Δ is still written as v1 (readable by older releases)', () => {
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, Buffer.from('x'))[2]).toBe(1);
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, Buffer.from('x'), { stale: 1 })[2]).toBe(2);
  });
});
