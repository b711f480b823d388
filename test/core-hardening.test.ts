/**
 * The lead is let go on every path, a timed-out refresh is throttled like a failed one, and
 * the keys a process follows while other processes refresh them are bounded: real Redis
 * servers, and a child process for the claims across processes.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createCache, type DogpileCache } from '../src/index.js';
import { cacheKeys } from '../src/store/key.js';
import { FOLLOWED_MAX, FOLLOWED_MAX_BYTES } from '../src/core/refreshing-elsewhere.js';
import { keyHintSize } from '../src/shared/keys.js';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, type JsonChild } from '../tools/child-process.js';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { startRedis } from '../tools/redis-server.js';
import { EventEmitter } from 'node:events';
import { GuardedBackend } from '../src/core/guarded-backend.js';
import type { CacheEmitter } from '../src/core/events.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import { StampedBackend } from '../src/store/stamped-backend.js';
import { MemoryGenerations } from '../src/store/generations.js';
import { processNow } from '../src/shared/clock.js';
import { EntryCodec } from '../src/store/codec.js';
import { portableSerializer } from '../src/store/serializer.js';
import { BackendError } from '../src/shared/errors.js';

const server = useRedis();
let redis: Redis;
const caches: DogpileCache[] = [];

beforeAll(() => {
  redis = server.client();
});
afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
  await killAllChildren();
});
afterAll(killAllChildren);

function cacheOn(options: Parameters<typeof createCache>[0] = {}): DogpileCache {
  const cache = createCache({ redis: server.client(), ...options });
  caches.push(cache);
  return cache;
}

function memoryCache(options: Parameters<typeof createCache>[0] = {}): DogpileCache {
  const cache = createCache(options);
  caches.push(cache);
  return cache;
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('every failure after the loader returned lets go of the lead at once and is announced', () => {
  // Far longer than the test's own bounds: a waiter that waited the lock out would time the test out.
  const LOCK_TTL = 60_000;

  /** A process of the get-or-compute fleet scenario that will call `key` (and say when it waits for another process). */
  async function waiter(key: string): Promise<JsonChild> {
    const config = { url: server.url, client: 'ioredis', key, loaderMs: 0, waits: true, cache: { lockTtl: LOCK_TTL, waitTimeout: 2 * LOCK_TTL } };
    return (await Fleet.start('get-or-compute', 1, config, { label: 'waiter', readyTimeoutMs: 20_000 })).member(0);
  }

  /** Scripts run by the server so far (the waiter's lookups; nothing else runs one meanwhile). */
  async function scriptCalls(): Promise<number> {
    const info = await redis.info('commandstats');
    return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  }

  async function subscribers(key: string): Promise<number> {
    const reply = (await redis.call('PUBSUB', 'NUMSUB', cacheKeys('dogpile', key).channel)) as [string, number];
    return Number(reply[1]);
  }

  const tooManyTags = Array.from({ length: 40 }, (_, i) => `verdict-${i}`);
  const callTags = Array.from({ length: 40 }, (_, i) => `call-${i}`);
  const cases: { name: string; errorName: string; options: Record<string, unknown>; value?: unknown }[] = [
    {
      name: 'the cacheable verdict throws',
      errorName: 'RangeError',
      options: {
        cacheable: () => {
          throw new RangeError('no verdict for this value');
        },
      },
    },
    { name: 'the verdict is not one of the four', errorName: 'InvalidOptionError', options: { cacheable: () => 'keep' } },
    { name: 'the verdict carries an empty tag', errorName: 'InvalidOptionError', options: { cacheable: () => ({ decision: 'store', ttl: 1000, tags: [''] }) } },
    { name: "the verdict's tags and the call's exceed 64 together", errorName: 'InvalidOptionError', options: { tags: callTags, cacheable: () => ({ decision: 'store', ttl: 1000, tags: tooManyTags }) } },
    { name: 'the value cannot be serialised', errorName: 'SerializationError', options: {}, value: { run: () => 1 } },
  ];

  for (const c of cases) {
    it(`${c.name}: a waiter in another process gets the error at once, the loader ran once, the key can be led again`, async () => {
      const key = freshId('verdict');
      const child = await waiter(key);
      const leader = cacheOn({ lockTtl: LOCK_TTL });
      const started = deferred();
      const release = deferred();
      let runs = 0;
      const led = leader.getOrCompute(
        key,
        async () => {
          runs++;
          started.resolve();
          await release.promise;
          return c.value ?? 'value';
        },
        { ttl: 60_000, ...c.options } as never,
      );
      const ledOutcome = led.then(
        () => undefined,
        (error: Error) => error,
      );
      await started.promise;
      const before = await scriptCalls();
      const call = launch([child], { mode: 'burst', calls: 1 }, { timeoutMs: 20_000, leadMs: 0 })[0]!;
      // The waiter's lookup found this process leading; it subscribed to the key's channel and
      // looked once more (an announcement made before that second look would let it lead).
      await child.take('waiting', 20_000);
      await waitUntil('the waiter subscribed and looked again', async () => (await subscribers(key)) === 1 && (await scriptCalls()) >= before + 2, 20_000);
      release.resolve();
      const error = await ledOutcome;
      expect(error?.name).toBe(c.errorName);
      // The lock is gone as soon as the leader's call settled.
      expect(await redis.exists(cacheKeys('dogpile', key).lock)).toBe(0);
      // Answered by the announcement, not by the lock running out (that would take a minute).
      const [result] = (await call).records;
      expect(result).toMatchObject({ ok: false, code: 'E_LOADER', causeName: c.errorName });
      expect(child.seen('loader')).toEqual([]);
      expect(runs).toBe(1);
      // The key is free: the next call leads and stores.
      expect(await leader.resolve(key, () => 'next', 60_000)).toMatchObject({ value: 'next', status: 'miss' });
    });
  }

  it('in process: a refresh whose verdict throws lets go of the lead, so the next stale call refreshes again', async () => {
    const cache = memoryCache({ staleWhileRevalidate: '1m' });
    const key = freshId('verdict-mem');
    let runs = 0;
    let throwing = false;
    const ends: string[] = [];
    cache.on('refresh', (e) => {
      if (e.phase === 'end') ends.push(e.outcome);
    });
    const options = {
      ttl: 20,
      cacheable: () => {
        if (throwing) throw new RangeError('no verdict');
        return 'store' as const;
      },
    };
    const call = () => cache.resolve(key, () => `v${++runs}`, options);
    expect((await call()).value).toBe('v1');
    await sleep(40);
    throwing = true;
    expect(await call()).toMatchObject({ status: 'stale', value: 'v1' });
    await waitUntil('the failed refresh', () => ends.length === 1);
    expect(ends).toEqual(['error']);
    throwing = false;
    expect(await call()).toMatchObject({ status: 'stale', value: 'v1' });
    await waitUntil('the second refresh', () => ends.length === 2, 5000);
    expect(ends).toEqual(['error', 'stored']);
    expect(runs).toBe(3);
    expect((await call()).value).toBe('v3');
  });
});

describe('a refresh given up by hardTimeout is a failed refresh: failSafeRetry holds', () => {
  const FAIL_SAFE_RETRY = 600;
  const HARD_TIMEOUT = 40;
  const PERIOD = 1800;

  for (const backend of ['memory', 'redis'] as const) {
    it(`${backend}: a hanging loader is started at most once per failSafeRetry, and callers meanwhile get the stale value without waiting for it`, async () => {
      const options = { staleIfError: '1m' as const, failSafeRetry: FAIL_SAFE_RETRY, hardTimeout: HARD_TIMEOUT, lockTtl: 30_000 };
      const a = backend === 'memory' ? memoryCache(options) : cacheOn(options);
      // On Redis, a second cache instance calls too: the hold is fleet-wide.
      const callers = backend === 'memory' ? [a] : [a, cacheOn(options)];
      const key = freshId(`hard-${backend}`);
      let hanging = false;
      let starts = 0;
      const loader = () => {
        starts++;
        return hanging ? new Promise<string>(() => {}) : `v${starts}`;
      };
      expect((await a.resolve(key, loader, 20)).value).toBe('v1');
      await sleep(40);
      hanging = true;
      starts = 0;
      const answers: { status: string; reason?: string; value: string }[] = [];
      const end = performance.now() + PERIOD;
      for (let i = 0; performance.now() < end; i++) {
        const r = await callers[i % callers.length]!.resolve(key, loader, 20);
        answers.push({ status: r.status, reason: r.staleReason, value: r.value });
        await sleep(5);
      }
      // Every caller got the stale value because of the failure (none got an error).
      expect(answers.every((r) => r.status === 'stale' && r.reason === 'error' && r.value === 'v1')).toBe(true);
      // One start per failSafeRetry (and one more at the edges), where each caller that found the
      // lead free would start one: a call takes about HARD_TIMEOUT + 5 ms then, so more than
      // PERIOD / (HARD_TIMEOUT + 5) = 40 starts; the bound below is far from both.
      expect(starts).toBeGreaterThanOrEqual(2); // the hold ends: a retry after failSafeRetry
      expect(starts).toBeLessThanOrEqual(Math.ceil(PERIOD / FAIL_SAFE_RETRY) + 2);
      expect(answers.length).toBeGreaterThan(4 * starts);
    });
  }
});

describe('keys refreshed by another process: what a process follows is bounded, the oldest forgotten first', () => {
  /**
   * `keys` stored stale (ttl 20 ms, staleWhileRevalidate) by a refresher cache whose refreshes
   * then hang; a follower cache on the same Redis reads them, oldest first, in chunks: each read
   * answers the stale value and follows the key's channel. Returns which keys' channels are
   * subscribed once every dropped channel has let go (after its linger), and the warnings seen.
   */
  async function followMany(keys: string[], expected: number, chunkSize: number): Promise<{ subscribed: boolean[]; warnings: string[] }> {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    // What is measured is the bounds: a SUBSCRIBE slowed past the default 1 s commandTimeout (a
    // starved test process) is not what these tests are about, and its key would not be followed.
    const options = { staleWhileRevalidate: '1m' as const, lockTtl: 30_000, commandTimeout: 10_000 };
    const refresher = cacheOn(options);
    const follower = cacheOn(options);
    const hanging = deferred<string>();
    const chunks = (size: number) => Array.from({ length: Math.ceil(keys.length / size) }, (_, i) => keys.slice(i * size, (i + 1) * size));
    try {
      for (const chunk of chunks(200)) await Promise.all(chunk.map((k) => refresher.resolve(k, () => 'v0', 20)));
      await sleep(40);
      // The refresher leads every key's refresh, which hangs: the lead stays with it.
      for (const chunk of chunks(200)) {
        const answers = await Promise.all(chunk.map((k) => refresher.resolve(k, () => hanging.promise, 20)));
        expect(answers.every((r) => r.status === 'stale')).toBe(true);
      }
      for (const chunk of chunks(chunkSize)) {
        const answers = await Promise.all(
          chunk.map((k) =>
            follower.resolve(
              k,
              () => {
                throw new Error('the follower never loads: the refresher leads');
              },
              20,
            ),
          ),
        );
        expect(answers.every((r) => r.status === 'stale' && r.value === 'v0')).toBe(true);
      }
      const channels = keys.map((k) => cacheKeys('dogpile', k).channel);
      const subscribed = async () => {
        const reply = (await redis.call('PUBSUB', 'NUMSUB', ...channels)) as (string | number)[];
        return channels.map((_, i) => Number(reply[2 * i + 1]) > 0);
      };
      // Dropped channels are unsubscribed a linger (1 s) after the key was forgotten, and the
      // newest keys' SUBSCRIBEs may still be on their way: the count alone can pass through the
      // bound while both are in flight. Settled is the newest `expected` keys followed and no other.
      const settled = await waitUntil('the followed channels to settle at the bound: the newest followed, the oldest dropped', async () => {
        const now = await subscribed();
        const oldest = keys.length - expected;
        return now.filter(Boolean).length === expected && !now.slice(0, oldest).some(Boolean) ? now : undefined;
      }, 20_000, 100);
      return { subscribed: settled, warnings };
    } finally {
      process.off('warning', onWarning);
      hanging.resolve('v1');
    }
  }

  it(`${FOLLOWED_MAX + 200} keys: ${FOLLOWED_MAX} followed, the 200 oldest forgotten (their channels unsubscribed), no listener warning`, async () => {
    const keys = Array.from({ length: FOLLOWED_MAX + 200 }, (_, i) => `${freshId('elsewhere')}-${i}`);
    const { subscribed, warnings } = await followMany(keys, FOLLOWED_MAX, 100);
    expect(subscribed.slice(0, 200).some(Boolean)).toBe(false);
    expect(subscribed.slice(200).every(Boolean)).toBe(true);
    expect(warnings).toEqual([]);
  });

  it('long keys: the key text followed stays within its budget in bytes, the oldest forgotten', async () => {
    const long = `${'k'.repeat(4000)}-${freshId('long')}`;
    const perKey = keyHintSize(`${long}-000`);
    const fits = Math.floor(FOLLOWED_MAX_BYTES / perKey);
    expect(fits).toBeLessThan(FOLLOWED_MAX);
    const keys = Array.from({ length: fits + 50 }, (_, i) => `${long}-${String(i).padStart(3, '0')}`);
    const { subscribed, warnings } = await followMany(keys, fits, 50);
    expect(subscribed.slice(0, 50).some(Boolean)).toBe(false);
    expect(subscribed.slice(50).every(Boolean)).toBe(true);
    expect(warnings).toEqual([]);
  });
});

describe('a subscription given up on at commandTimeout', () => {
  /**
   * Every caller of `listen` (a waiter, a refresh followed here, a key refreshed elsewhere)
   * treats a subscription that timed out as failed and never holds its unlisten. Redis answers
   * the SUBSCRIBE later all the same: that late subscription must be let go, or its listener and
   * channel stay for the life of the process (and a bounded follower is over its bound).
   */
  it('is let go once Redis confirms it after all: the channel is not left subscribed', async () => {
    const own = await startRedis();
    const admin = own.client();
    const probe = own.client();
    const stamps = new MemoryGenerations(processNow);
    try {
      const prefix = freshId('late-subscribe');
      const backend = new StampedBackend(new RedisBackend(await own.libraryClient(), { prefix, codec: new EntryCodec(portableSerializer), inlineMax: 65_536, l1: undefined }), {
        generations: ['/'],
        stamps,
        jitter: 0,
        tagStampTtl: 60_000,
      });
      const guarded = new GuardedBackend(backend, { commandTimeout: 200, backendCooldown: 100 }, new EventEmitter() as CacheEmitter, () => {});
      // The subscriber's connection is up before the pause (kept subscribed to another channel): the SUBSCRIBE itself waits.
      await guarded.listen('warm-up', () => {});
      const connection = async () => {
        const line = ((await admin.call('CLIENT', 'LIST')) as string).split('\n').find((l) => / sub=[1-9]/.test(l));
        return Object.fromEntries((line ?? '').split(' ').map((field) => field.split('=', 2)));
      };
      const id = (await connection()).id;
      expect(id).toBeDefined();
      const channel = cacheKeys(prefix, 'k').channel;
      await admin.call('CLIENT', 'PAUSE', '800', 'ALL');
      const resumed = probe.ping().then(() => 'resumed');
      const listening = guarded.listen('k', () => {}).then(
        () => 'listening',
        (error: unknown) => (error instanceof BackendError ? 'timed out' : `other: ${String(error)}`),
      );
      expect(await Promise.race([listening, resumed])).toBe('timed out');
      await resumed;
      // The late SUBSCRIBE reaches Redis once the pause ends; its UNSUBSCRIBE follows on the same connection.
      const last = await waitUntil('the late subscription to be confirmed, then let go', async () => {
        const fields = Object.fromEntries(((await admin.call('CLIENT', 'LIST', 'ID', id)) as string).trim().split(' ').map((f) => f.split('=', 2)));
        return fields.cmd === 'unsubscribe' ? fields : undefined;
      }, 5000, 20);
      expect(last.sub).toBe('1');
      expect(((await admin.call('PUBSUB', 'NUMSUB', channel)) as (string | number)[])[1]).toBe(0);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => {});
      stamps.close();
      await own.stop();
    }
  });
});

describe('a refresh running in this process after a tag of its value was invalidated', () => {
  it('no later caller is answered the invalidated stale value', async () => {
    const cache = createCache({ staleWhileRevalidate: 60_000 });
    try {
      const key = freshId('refreshing-tagged');
      const tag = freshId('tag');
      expect(await cache.getOrCompute(key, () => 'v1', { ttl: 50, tags: [tag] })).toBe('v1');
      await sleep(80);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      // Past its TTL, inside its stale window: answered stale at once, one refresh starts (held by the gate).
      const first = await cache.resolve(key, async () => {
        await gate;
        return 'v2';
      }, { ttl: 60_000, tags: [tag] });
      expect(first).toMatchObject({ value: 'v1', status: 'stale' });
      await cache.invalidateTags([tag]);
      const later = cache.resolve(key, () => 'v3', { ttl: 60_000, tags: [tag] });
      release();
      expect((await later).value).not.toBe('v1');
    } finally {
      await cache.close();
    }
  });
});
