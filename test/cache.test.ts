import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import {
  createCache,
  cacheWithoutDogpiling,
  getOrCompute,
  setDefaultCache,
  getDefaultCache,
  jsonSerializer,
  DogpileCache,
  InvalidOptionError,
  SerializationError,
  WaitTimeoutError,
  CacheClosedError,
  LockLostError,
  LoaderError,
  RemoteLoaderError,
  RedisLock,
  type CacheEvents,
} from '../src/index.js';
import { AbandonedLoad } from '../src/core/cache.js';
import { useRedis } from './support/use-redis.js';
import { startRedis } from '../tools/redis-server.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { CHANNEL_LINGER_MS, sharedSubscriber } from '../src/redis/subscriber.js';
import { cacheKeys } from '../src/store/key.js';

const server = useRedis();
let redis: Redis;
let n = 0;
const uniq = (s: string) => `${s}-${++n}`;

beforeAll(() => {
  redis = server.client();
});

function record<E extends keyof CacheEvents>(cache: DogpileCache, event: E): CacheEvents[E][0][] {
  const seen: CacheEvents[E][0][] = [];
  (cache.on as (e: E, l: (info: CacheEvents[E][0]) => void) => void)(event, (info) => seen.push(info));
  return seen;
}

const kinds: [string, () => DogpileCache][] = [
  ['embedded (no Redis)', () => createCache()],
  ['Redis', () => createCache({ redis })],
  ['Redis with L1', () => createCache({ redis, l1: { ttl: 500 } })],
];

describe.each(kinds)('%s', (_label, make) => {
  it('runs the loader once for concurrent callers and serves the cached value after', async () => {
    const cache = make();
    const key = uniq('flight');
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(50);
      return { runs };
    };
    const results = await Promise.all(Array.from({ length: 100 }, () => cache.resolve(key, loader, '10s')));
    expect(runs).toBe(1);
    expect(results.filter((r) => r.status === 'miss')).toHaveLength(1);
    expect(results.every((r) => r.value.runs === 1)).toBe(true);
    const again = await cache.resolve(key, loader, 10_000);
    expect(again.status).toBe('hit');
    expect(runs).toBe(1);
    await cache.close();
  });

  it('gives the loader its key and a live signal', async () => {
    const cache = make();
    const key = uniq('ctx');
    let seen: { key: string; aborted: boolean } | undefined;
    await cache.getOrCompute(key, ({ key: k, signal }) => {
      seen = { key: k, aborted: signal.aborted };
      return 1;
    }, 1000);
    expect(seen).toEqual({ key, aborted: false });
    await cache.close();
  });

  it('passes a loader error to every concurrent caller and caches nothing', async () => {
    const cache = make();
    const key = uniq('err');
    const errorEvents = record(cache, 'loaderError');
    let runs = 0;
    const failing = async () => {
      runs++;
      await sleep(30);
      throw new RangeError('db down');
    };
    const settled = await Promise.allSettled(Array.from({ length: 20 }, () => cache.getOrCompute(key, failing, 1000)));
    expect(runs).toBe(1);
    expect(settled.every((s) => s.status === 'rejected' && (s.reason as Error) instanceof RangeError)).toBe(true);
    expect(errorEvents).toHaveLength(1);
    expect(await cache.getOrCompute(key, () => 'recovered', 1000)).toBe('recovered');
    await cache.close();
  });

  it('expires values after their TTL', async () => {
    const cache = make();
    const key = uniq('ttl');
    expect(await cache.getOrCompute(key, () => 'a', 60)).toBe('a');
    await sleep(600);
    expect(await cache.getOrCompute(key, () => 'b', 60)).toBe('b');
    await cache.close();
  });

  it('shares undefined with concurrent callers but does not cache it', async () => {
    const cache = make();
    const key = uniq('undef');
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(20);
      return undefined;
    };
    const values = await Promise.all(Array.from({ length: 10 }, () => cache.getOrCompute(key, loader, 1000)));
    expect(values.every((v) => v === undefined)).toBe(true);
    expect(runs).toBe(1);
    await cache.getOrCompute(key, loader, 1000);
    expect(runs).toBe(2);
    await cache.close();
  });

  it('lets concurrent callers run their own loader when the result is private', async () => {
    const cache = make();
    const key = uniq('private');
    let runs = 0;
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        cache.resolve(key, async () => {
          runs++;
          await sleep(20);
          return `caller-${i}`;
        }, { ttl: 1000, cacheable: () => 'private' }),
      ),
    );
    expect(runs).toBe(5);
    expect(results.map((r) => r.value)).toEqual(['caller-0', 'caller-1', 'caller-2', 'caller-3', 'caller-4']);
    expect(await cache.get(key)).toBeUndefined();
    await cache.close();
  });

  it('a hit-for-miss marker sends concurrent callers to their own loaders at once, not one after another', async () => {
    const cache = make();
    const key = uniq('marker');
    await cache.resolve(key, () => 'private-1', { ttl: 10_000, cacheable: () => 'private', hitForMissTtl: 5_000 });
    let running = 0;
    let peak = 0;
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        cache.resolve(key, async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(50);
          running--;
          return `own-${i}`;
        }, { ttl: 10_000, cacheable: () => 'private', hitForMissTtl: 5_000 }),
      ),
    );
    expect(results.map((r) => r.value)).toEqual(['own-0', 'own-1', 'own-2', 'own-3', 'own-4']);
    expect(results.every((r) => r.status === 'pass')).toBe(true);
    expect(peak).toBe(5);
    // a cacheable result replaces the marker
    expect(await cache.getOrCompute(key, () => 'public', 10_000)).toBe('public');
    expect(await cache.getOrCompute(key, () => 'again', 10_000)).toBe('public');
    await cache.close();
  });

  it('an abandoned loader hands its lead to exactly one waiter, with no marker and no loaderError', async () => {
    const cache = make();
    const key = uniq('abandoned');
    const loaderErrors = record(cache, 'loaderError');
    const opts = { ttl: 10_000, hitForMissTtl: 5_000 };
    const leader = cache.resolve(key, async () => {
      await sleep(50);
      throw new AbandonedLoad('gone');
    }, opts);
    await sleep(10);
    let runs = 0;
    const waiters = Array.from({ length: 5 }, (_, i) =>
      cache.resolve(key, async () => {
        runs++;
        await sleep(50);
        return `waiter-${i}`;
      }, opts),
    );
    await expect(leader).rejects.toBeInstanceOf(AbandonedLoad);
    const results = await Promise.all(waiters);
    expect(runs).toBe(1);
    const value = results.find((r) => r.status === 'miss')!.value;
    expect(results.map((r) => r.status).sort()).toEqual(['coalesced', 'coalesced', 'coalesced', 'coalesced', 'miss']);
    expect(results.every((r) => r.value === value)).toBe(true);
    expect(loaderErrors).toEqual([]);
    expect(await cache.getOrCompute(key, () => 'later', 10_000)).toBe(value);
    await cache.close();
  });

  it('get / set / delete', async () => {
    const cache = make();
    const key = uniq('gsd');
    expect(await cache.get(key)).toBeUndefined();
    await cache.set(key, { a: 1 }, '1m');
    expect(await cache.get(key)).toEqual({ a: 1 });
    expect(await cache.getOrCompute(key, () => ({ a: 2 }), 1000)).toEqual({ a: 1 });
    expect(await cache.delete(key)).toBe(true);
    expect(await cache.get(key)).toBeUndefined();
    await cache.close();
  });

  it('rejects bad input at once, naming the argument, and writes nothing', async () => {
    const cache = make();
    const loader = () => 1;
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => cache.getOrCompute('', loader, 1000), /Invalid key: must not be empty/],
      [() => cache.getOrCompute(42 as unknown as string, loader, 1000), /Invalid key/],
      [() => cache.getOrCompute('k', loader, 0), /Invalid ttl/],
      [() => cache.getOrCompute('k', loader, -5), /Invalid ttl/],
      [() => cache.getOrCompute('k', loader, Number.NaN), /Invalid ttl/],
      [() => cache.getOrCompute('k', loader, Number.POSITIVE_INFINITY), /Invalid ttl/],
      [() => cache.getOrCompute('k', loader, 'soon' as never), /Invalid ttl/],
      [() => cache.getOrCompute('k', loader, undefined as never), /Invalid ttl: is required/],
      [() => cache.getOrCompute('k', loader, { ttl: 1000, lockTtl: 0 }), /Invalid lockTtl/],
      [() => cache.getOrCompute('k', 'nope' as never, 1000), /Invalid loader: expected a function/],
      [() => cache.set('k', 1, 0), /Invalid ttl/],
    ];
    for (const [call, message] of cases) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect(String((err as Error).message)).toMatch(message);
    }
    const unserialisable = await cache.getOrCompute('fn-value', () => ({ f: () => 1 }), 1000).catch((e: unknown) => e);
    expect(unserialisable).toBeInstanceOf(SerializationError);
    expect((unserialisable as SerializationError).key).toBe('fn-value');
    await expect(cache.set('fn-value', { f: () => 1 }, 1000)).rejects.toBeInstanceOf(SerializationError);
    expect(await cache.get('fn-value')).toBeUndefined();
    expect(await cache.get('k')).toBeUndefined();
    await cache.close();
  });

  it('refuses calls after close()', async () => {
    const cache = make();
    await cache.close();
    await expect(cache.getOrCompute('x', () => 1, 1000)).rejects.toBeInstanceOf(CacheClosedError);
  });
});

describe('createCache options', () => {
  it('names the bad option', () => {
    expect(() => createCache({ lockTtl: -1 })).toThrow(/Invalid lockTtl/);
    expect(() => createCache({ waitTimeout: Number.NaN })).toThrow(/Invalid waitTimeout/);
    expect(() => createCache({ redis: 'localhost:6379' })).toThrow(/Invalid redis: expected a URL/);
    expect(() => createCache({ redis: {} as never })).toThrow(/Invalid redis/);
    expect(() => createCache({ l1: { max: 0 } })).toThrow(/Invalid l1.max/);
    expect(() => createCache({ prefix: 'a{b' })).toThrow(/Invalid prefix/);
    expect(() => createCache({ onWaitTimeout: 'wait' as never })).toThrow(/Invalid onWaitTimeout/);
    expect(() => createCache({ serializer: {} as never })).toThrow(/Invalid serializer/);
    expect(() => createCache({ lockTTL: 5 } as never)).toThrow(/Invalid lockTTL: unknown option/);
  });
});

describe('values through Redis', () => {
  it('round-trip faithfully with the default serializer', async () => {
    const cache = createCache({ redis });
    const other = createCache({ redis });
    const value = {
      object: { nested: [1, 'two', { three: 3 }] },
      string: 'héllo ✓',
      number: -1.5,
      null: null,
      undef: undefined,
      date: new Date('2024-01-02T03:04:05.678Z'),
      buffer: Buffer.from([0, 1, 2, 255]),
      bytes: new Uint8Array([9, 8, 7]),
      map: new Map<unknown, unknown>([['a', 1], [2, { b: true }]]),
      set: new Set([1, 'x']),
      big: 12345678901234567890n,
    };
    const key = uniq('types');
    await cache.getOrCompute(key, () => value, 10_000);
    const back = (await other.get(key)) as typeof value;
    expect(back).toEqual(value);
    expect(back.date).toBeInstanceOf(Date);
    expect(Buffer.isBuffer(back.buffer)).toBe(true);
    expect(back.bytes).toBeInstanceOf(Uint8Array);
    expect(back.map).toBeInstanceOf(Map);
    expect(back.set).toBeInstanceOf(Set);
    expect(typeof back.big).toBe('bigint');
    for (const primitive of ['s', 0, null, [1, 2]]) {
      const k = uniq('prim');
      await cache.set(k, primitive, 10_000);
      expect(await other.get(k)).toEqual(primitive);
    }
    await cache.close();
    await other.close();
  });

  it('accepts a pluggable serializer', async () => {
    const cache = createCache({ redis, serializer: jsonSerializer, prefix: 'json' });
    const key = uniq('json');
    await cache.set(key, { a: [1, 2] }, 10_000);
    expect(await redis.get(`json:v:{${key}}`)).toContain('{"a":[1,2]}');
    expect(await createCache({ redis, serializer: jsonSerializer, prefix: 'json' }).get(key)).toEqual({ a: [1, 2] });
    await cache.close();
  });

  it('treats a corrupt or foreign value as a miss and reports it', async () => {
    const cache = createCache({ redis });
    const corrupt = record(cache, 'corrupt');
    const key = uniq('corrupt');
    await redis.set(`dogpile:v:{${key}}`, 'written by someone else');
    expect(await cache.getOrCompute(key, () => 'fresh', 10_000)).toBe('fresh');
    expect(corrupt).toHaveLength(1);
    expect(await createCache({ redis }).get(key)).toBe('fresh');
    const key2 = uniq('corrupt-payload');
    await redis.set(`dogpile:v:{${key2}}`, Buffer.concat([Buffer.from([0xd0, 0x67, 1, 1]), Buffer.alloc(16), Buffer.from('not v8')]));
    expect(await cache.getOrCompute(key2, () => 'fresh2', 10_000)).toBe('fresh2');
    expect(corrupt).toHaveLength(2);
    expect(await cache.get(key2)).toBe('fresh2');
    await cache.close();
  });

  it('hashes over-long keys and keeps user keys apart from the library keys', async () => {
    const cache = createCache({ redis, prefix: 'iso' });
    const long = 'x'.repeat(5000);
    expect(await cache.getOrCompute(long, () => 'long', 10_000)).toBe('long');
    const stored = await redis.keys('iso:v:*');
    expect(stored.some((k) => k.length < 100 && k.startsWith('iso:v:{#'))).toBe(true);
    expect(await cache.getOrCompute('x'.repeat(4999) + 'y', () => 'other', 10_000)).toBe('other');
    // keys shaped like the library's own never touch its lock, channel or lead keys
    const lock = new RedisLock(redis, 'shared-name', { prefix: 'iso' });
    await lock.acquire();
    for (const k of ['shared-name', 'lock:{shared-name}', '}', '{', '#abc', 'l:{shared-name}']) {
      expect(await cache.getOrCompute(k, () => `v-${k}`, 10_000)).toBe(`v-${k}`);
    }
    expect(lock.isHeld).toBe(true);
    expect(await redis.get('iso:lock:{shared-name}')).toContain('|');
    await lock.release();
    for (const k of ['shared-name', 'lock:{shared-name}', '}', '{', '#abc', 'l:{shared-name}']) {
      expect(await cache.get(k)).toBe(`v-${k}`);
    }
    await cache.close();
  });
});

/**
 * For the tests whose waiter must be woken by the leader's announcement: a waiter that hears
 * nothing also wakes, when the lock's remaining time runs out, and then finds the value or
 * leads. So the lock lives 30 s (and the wait may last 60 s), and the waiter must be answered
 * within a third of the lock's lifetime: far above a loader of a few hundred ms plus one
 * delivery on a loaded machine, far below the wake-up that the lock's expiry would bring.
 */
const ANNOUNCED = { lockTtl: 30_000, waitTimeout: 60_000 };
const WOKEN_WITHIN_MS = ANNOUNCED.lockTtl / 3;

/**
 * A leader's loader that runs until `open()`: the test lets it finish only once the other
 * cache's caller sleeps on the key's channel, so neither a slow start of the leader nor a slow
 * waiter can turn the waiter into a leader or a hit, and only an announcement can wake it.
 */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open, running: false };
}

/** Lua scripts the server ran (EVALSHA and EVAL); a look-up is one. */
async function scriptsRun(): Promise<number> {
  const info = await redis.info('commandstats');
  return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

/**
 * Resolves once a caller of another cache (with `coalesced` events recorded), started after
 * `before` was taken, sleeps on `key`'s channel: it is subscribed, its look-up answered "wait"
 * (the `coalesced` event), and when that look-up went before the subscription, the one it
 * sends once subscribed (the second script since `before`) has been run too. Should a version
 * subscribe before its only look-up, the last condition is given up 500 ms after the first two
 * hold: by then that look-up was answered long ago.
 */
async function asleep(cache: DogpileCache, key: string, coalesced: { remote: boolean }[], before: number): Promise<void> {
  const { channel } = cacheKeys(cache.options.prefix, key);
  let since: number | undefined;
  await waitUntil('the other cache to sleep on the channel', async () => {
    const subscribed = Number(((await redis.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]) > 0;
    if (!subscribed || !coalesced.some((c) => c.remote)) return false;
    since ??= performance.now();
    return (await scriptsRun()) >= before + 2 || performance.now() - since > 500;
  });
}

describe('coordination through Redis (two caches = two processes)', () => {
  it('a waiter gets the leader value from the announcement without running its loader', async () => {
    const a = createCache({ redis: server.client(), ...ANNOUNCED });
    const b = createCache({ redis: server.client(), ...ANNOUNCED });
    const key = uniq('two');
    const coalesced = record(b, 'coalesced');
    const g = gate();
    const leader = a.resolve(key, async () => {
      g.running = true;
      await g.opened;
      return 'from-a';
    }, 10_000);
    await waitUntil('the first cache leads', () => g.running);
    const before = await scriptsRun();
    const waiting = b.resolve(key, () => 'from-b', 10_000);
    await asleep(b, key, coalesced, before);
    const started = performance.now();
    g.open();
    const waiter = await waiting;
    expect(performance.now() - started).toBeLessThan(WOKEN_WITHIN_MS);
    expect(waiter.value).toBe('from-a');
    expect(waiter.status).toBe('coalesced');
    expect(coalesced).toEqual([{ key, remote: true }]);
    expect((await leader).status).toBe('miss');
    await a.close();
    await b.close();
  });

  it('an abandoned lead is released to the other process: one of its waiters leads, no marker is left', async () => {
    const a = createCache({ redis: server.client(), hitForMissTtl: 5_000, ...ANNOUNCED });
    const b = createCache({ redis: server.client(), hitForMissTtl: 5_000, ...ANNOUNCED });
    const key = uniq('abandoned-remote');
    const coalesced = record(b, 'coalesced');
    const g = gate();
    const leader = a.resolve(key, async () => {
      g.running = true;
      await g.opened;
      throw new AbandonedLoad('gone');
    }, 10_000);
    await waitUntil('the first cache leads', () => g.running);
    const before = await scriptsRun();
    let runs = 0;
    const waiters = Array.from({ length: 4 }, (_, i) =>
      b.resolve(key, async () => {
        runs++;
        await sleep(50);
        return `b-${i}`;
      }, 10_000),
    );
    await asleep(b, key, coalesced, before);
    g.open();
    const released = performance.now();
    await expect(leader).rejects.toBeInstanceOf(AbandonedLoad);
    const results = await Promise.all(waiters);
    // Woken by the release's announcement, not by the lock's expiry.
    expect(performance.now() - released).toBeLessThan(WOKEN_WITHIN_MS);
    expect(runs).toBe(1);
    expect(new Set(results.map((r) => r.value)).size).toBe(1);
    expect(results.filter((r) => r.status === 'miss')).toHaveLength(1);
    // Stored, not marked: the first process now hits.
    expect(await a.resolve(key, () => 'a-again', 10_000)).toMatchObject({ value: results[0]!.value, status: 'hit' });
    await a.close();
    await b.close();
  });

  it.each([
    ['per call', {}, { onRemoteError: 'load' as const }],
    ['on createCache', { onRemoteError: 'load' as const }, {}],
  ])('onRemoteError: a loader error in another process is thrown by default, or with "load" (%s) one own loader run serves this process', async (_where, cacheOptions, callOptions) => {
    const a = createCache({ redis: server.client() });
    const plain = createCache({ redis: server.client() });
    const loading = createCache({ redis: server.client(), ...cacheOptions });
    try {
      for (const [b, mode] of [[plain, 'throw'], [loading, 'load']] as const) {
        const key = uniq(`remote-error-${mode}`);
        const leader = a.resolve(key, async () => {
          await sleep(150);
          throw new Error('database down');
        }, 10_000);
        await sleep(50);
        let runs = 0;
        const waiters = Array.from({ length: 3 }, () =>
          b.resolve(key, async () => {
            runs++;
            await sleep(20);
            return 'own';
          }, { ttl: 10_000, ...(mode === 'load' ? callOptions : {}) }),
        );
        await expect(leader).rejects.toThrow('database down');
        const settled = await Promise.allSettled(waiters);
        if (mode === 'throw') {
          expect(runs).toBe(0);
          for (const r of settled) {
            expect(r.status).toBe('rejected');
            expect((r as PromiseRejectedResult).reason).toBeInstanceOf(LoaderError);
            expect(((r as PromiseRejectedResult).reason as LoaderError).code).toBe('E_LOADER');
            // Its own class, exported from the package, with the remote error's name and message.
            expect((r as PromiseRejectedResult).reason).toBeInstanceOf(RemoteLoaderError);
            expect((r as PromiseRejectedResult).reason).toMatchObject({ name: 'RemoteLoaderError', remoteMessage: 'database down' });
          }
        } else {
          expect(runs).toBe(1);
          const results = settled.map((r) => (r as PromiseFulfilledResult<{ value: string; status: string }>).value);
          expect(results.map((r) => r.value)).toEqual(['own', 'own', 'own']);
          expect(results.map((r) => r.status).sort()).toEqual(['coalesced', 'coalesced', 'miss']);
        }
      }
    } finally {
      await Promise.all([a.close(), plain.close(), loading.close()]);
    }
  });

  it('onRemoteError "load": when the run this process started after a remote failure is abandoned, the callers joined to it run again instead of answering undefined', async () => {
    const a = createCache({ redis: server.client() });
    const b = createCache({ redis: server.client(), onRemoteError: 'load' });
    try {
      const key = uniq('remote-error-abandoned');
      const leader = a.resolve(key, async () => {
        await sleep(150);
        throw new Error('database down');
      }, 10_000);
      await sleep(50);
      let runs = 0;
      const waiters = Array.from({ length: 3 }, () =>
        b.resolve(key, async () => {
          runs++;
          await sleep(20);
          // The first run after the remote failure has nothing to share (as an HTTP capture cut short).
          if (runs === 1) throw new AbandonedLoad('cut short');
          return 'own';
        }, 10_000),
      );
      await expect(leader).rejects.toThrow('database down');
      const settled = await Promise.allSettled(waiters);
      expect(settled.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason)).toEqual([expect.any(AbandonedLoad)]);
      const values = settled.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ value: string }>).value.value);
      expect(values).toEqual(['own', 'own']);
      expect(runs).toBe(2);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a large value is stored, announced without inlining, and read by the waiter', async () => {
    const a = createCache({ redis, inlineMax: 100, ...ANNOUNCED });
    const b = createCache({ redis: server.client(), inlineMax: 100, ...ANNOUNCED });
    const key = uniq('large');
    const big = 'z'.repeat(10_000);
    const coalesced = record(b, 'coalesced');
    const g = gate();
    const leader = a.getOrCompute(key, async () => {
      g.running = true;
      await g.opened;
      return big;
    }, 10_000);
    await waitUntil('the first cache leads', () => g.running);
    const before = await scriptsRun();
    const waiting = b.getOrCompute(key, () => 'nope', 10_000);
    await asleep(b, key, coalesced, before);
    const started = performance.now();
    g.open();
    expect(await waiting).toBe(big);
    expect(performance.now() - started).toBeLessThan(WOKEN_WITHIN_MS);
    await leader;
    await a.close();
    await b.close();
  });

  it('waitTimeout: throws WaitTimeoutError by default, or runs the loader with onWaitTimeout "load"', async () => {
    const a = createCache({ redis });
    const b = createCache({ redis: server.client(), waitTimeout: 150 });
    const key = uniq('wait');
    const timeouts = record(b, 'waitTimeout');
    const leader = a.getOrCompute(key, async () => {
      await sleep(1000);
      return 'slow';
    }, 10_000);
    await sleep(40);
    const err = await b.getOrCompute(key, () => 'b', 10_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect((err as WaitTimeoutError).message).toMatch(/waitTimeout/);
    const own = await b.resolve(key, () => 'b-own', { ttl: 10_000, onWaitTimeout: 'load' });
    expect(own).toMatchObject({ value: 'b-own', status: 'pass' });
    expect(timeouts).toHaveLength(2);
    expect(await leader).toBe('slow');
    await a.close();
    await b.close();
  });

  it('a caller signal stops only that caller', async () => {
    const a = createCache({ redis });
    const key = uniq('signal');
    const ac = new AbortController();
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(150);
      return 'v';
    };
    const first = a.getOrCompute(key, loader, { ttl: 10_000, signal: ac.signal });
    const second = a.getOrCompute(key, loader, 10_000);
    ac.abort();
    await expect(first).rejects.toThrow(/aborted/);
    expect(await second).toBe('v');
    expect(runs).toBe(1);
    await a.close();
  });

  it('a leader that lost its lock does not overwrite the newer value, and its signal aborts', async () => {
    const a = createCache({ redis, lockTtl: 300 });
    const b = createCache({ redis: server.client(), lockTtl: 300 });
    const key = uniq('fence');
    const lost = record(a, 'lockLost');
    let signalReason: unknown;
    const slowLeader = a.getOrCompute(key, async ({ signal }) => {
      signal.addEventListener('abort', () => (signalReason = signal.reason));
      // the lock is deleted under the leader (as if it had expired during a long pause)
      await redis.del(`dogpile:l:{${key}}`);
      await sleep(400);
      return 'stale';
    }, 10_000);
    await sleep(50);
    expect(await b.getOrCompute(key, () => 'new', 10_000)).toBe('new');
    expect(await slowLeader).toBe('stale');
    expect(await createCache({ redis }).get(key)).toBe('new');
    expect(lost).toHaveLength(1);
    expect(signalReason).toBeInstanceOf(LockLostError);
    await a.close();
    await b.close();
  });

  it('a loader that honours the signal after losing the lock rejoins and gets the new leader value', async () => {
    const a = createCache({ redis, lockTtl: 300 });
    const b = createCache({ redis: server.client(), lockTtl: 300 });
    const key = uniq('rejoin');
    const leader = a.getOrCompute(key, async ({ signal }) => {
      await redis.del(`dogpile:l:{${key}}`);
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      return 'never';
    }, 10_000);
    await sleep(30);
    const fromB = b.getOrCompute(key, async () => {
      await sleep(400);
      return 'b-value';
    }, 10_000);
    expect(await leader).toBe('b-value');
    expect(await fromB).toBe('b-value');
    await a.close();
    await b.close();
  });

  it('one Redis round trip per miss to look up or lead, one to store and release, in-process callers coalesced', async () => {
    const cache = createCache({ redis: server.client() });
    const key = uniq('roundtrips');
    const before = await evalshaCalls();
    await Promise.all(Array.from({ length: 50 }, () => cache.getOrCompute(key, async () => {
      await sleep(50);
      return 1;
    }, 10_000)));
    expect((await evalshaCalls()) - before).toBe(2);
    // a hit on a value this process has seen is one plain GET, no script
    const gets = await commandCalls('get');
    expect(await cache.getOrCompute(key, () => 2, 10_000)).toBe(1);
    expect((await evalshaCalls()) - before).toBe(2);
    expect((await commandCalls('get')) - gets).toBe(1);
    // a key deleted elsewhere: the GET misses and the lookup-or-lead script takes over
    await redis.del(`dogpile:v:{${key}}`);
    expect(await cache.getOrCompute(key, () => 3, 10_000)).toBe(3);
    expect(await cache.getOrCompute(key, () => 4, 10_000)).toBe(3);
    await cache.close();
  });
});

async function commandCalls(command: string): Promise<number> {
  const info = String(await server.command('INFO', 'commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

/** Script calls that ran (a first EVALSHA on a fresh server fails with NOSCRIPT and is retried as EVAL). */
async function evalshaCalls(): Promise<number> {
  const info = String(await server.command('INFO', 'commandstats'));
  let total = 0;
  for (const m of info.matchAll(/cmdstat_(evalsha|eval):calls=(\d+),.*failed_calls=(\d+)/g)) total += Number(m[2]) - Number(m[3]);
  return total;
}

describe('when Redis fails', () => {
  it('keeps answering from the loader while Redis is down, reports it, and recovers by itself', async () => {
    const own = await startRedis();
    const client = own.client({ maxRetriesPerRequest: 1, enableOfflineQueue: false });
    const cache = createCache({ redis: client, commandTimeout: 200, backendCooldown: 100 });
    const backendErrors = record(cache, 'backendError');
    const key = uniq('down');
    expect(await cache.getOrCompute(key, () => 'first', 60_000)).toBe('first');
    await own.kill();
    let runs = 0;
    const values = await Promise.all(Array.from({ length: 10 }, () => cache.resolve(key, async () => {
      runs++;
      await sleep(20);
      return 'while-down';
    }, 60_000)));
    expect(values.every((v) => v.value === 'while-down' && v.degraded)).toBe(true);
    expect(runs).toBe(1); // in-process single-flight still applies
    expect(backendErrors.length).toBeGreaterThan(0);
    await own.start();
    for (let i = 0; i < 100 && client.status !== 'ready'; i++) await sleep(50);
    await sleep(150);
    expect(await cache.getOrCompute(key, () => 'after', 60_000)).toBe('after');
    expect(await cache.getOrCompute(key, () => 'cached?', 60_000)).toBe('after');
    expect(await own.command('EXISTS', `dogpile:v:{${key}}`)).toBe(1);
    await cache.close();
    await own.stop();
  });

  it('a refresh running here stops answering its stale value while Redis is unusable, its channel still up: the caller runs without Redis', async () => {
    // A write made meanwhile could not be heard of (or waits in the autoRecovery queue): a
    // stale copy from memory is no answer then, as for any other key.
    const own = await startRedis();
    const cache = createCache({ redis: own.client(), commandTimeout: 100, backendCooldown: 5_000 });
    const backendErrors = record(cache, 'backendError');
    const key = uniq('refresh-down');
    const opts = { ttl: 100, staleWhileRevalidate: '1m' } as const;
    expect(await cache.getOrCompute(key, () => 'v1', opts)).toBe('v1');
    await sleep(150);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let refreshRuns = 0;
    const refreshing = async () => {
      refreshRuns++;
      await gate;
      return 'v2';
    };
    expect(await cache.resolve(key, refreshing, opts)).toMatchObject({ value: 'v1', status: 'stale' });
    await waitUntil('the refresh to start', () => refreshRuns === 1, 5_000);
    // While Redis is up, the refresh's stale value answers the key's callers (from memory once
    // the key's channel is followed and a lookup sent since confirmed the value).
    for (let i = 0; i < 5; i++) {
      expect(await cache.resolve(key, refreshing, opts)).toMatchObject({ value: 'v1', status: 'stale' });
      await sleep(50);
    }
    // Redis stops answering (its connections stay up): one timed-out command opens the breaker.
    await own.debugSleepInBackground(800);
    await expect(cache.get(uniq('probe'))).rejects.toMatchObject({ code: 'E_BACKEND' });
    expect(backendErrors.length).toBeGreaterThan(0);
    let localRuns = 0;
    const during = await cache.resolve(key, () => {
      localRuns++;
      return 'local';
    }, opts);
    expect(during).toMatchObject({ value: 'local', degraded: true });
    expect(localRuns).toBe(1);
    release();
    await sleep(900);
    await cache.close();
    await own.stop();
  });

  it('bounds a slow Redis by commandTimeout and still returns the loader value', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client(), commandTimeout: 100, backendCooldown: 50 });
    const backendErrors = record(cache, 'backendError');
    await own.debugSleepInBackground(800);
    const r = await cache.resolve(uniq('slow'), () => 'computed', 60_000);
    expect(r).toMatchObject({ value: 'computed', degraded: true });
    expect(backendErrors[0]?.error.message).toMatch(/commandTimeout/);
    await sleep(900);
    await cache.close();
    await own.stop();
  });

  it('a hit read of a key the process knows is bounded by commandTimeout too: it and the readers that joined it fall back together', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client(), commandTimeout: 100, backendCooldown: 50 });
    const backendErrors = record(cache, 'backendError');
    const key = uniq('slow-hit');
    expect(await cache.getOrCompute(key, () => 'stored', 60_000)).toBe('stored');
    await own.debugSleepInBackground(800);
    let runs = 0;
    const loader = () => {
      runs++;
      return 'computed';
    };
    // Five readers of a value believed fresh share one GET; none waits for the server to wake:
    // a read answered by the server would return 'stored'.
    const values = await Promise.all(Array.from({ length: 5 }, () => cache.getOrCompute(key, loader, 60_000)));
    expect(values).toEqual(Array(5).fill('computed'));
    expect(runs).toBe(1);
    expect(backendErrors[0]).toMatchObject({ key, operation: 'get' });
    expect(backendErrors[0]?.error.message).toMatch(/commandTimeout/);
    await sleep(900);
    await cache.close();
    await own.stop();
  });

  it('hit reads of one tick share one write to Redis, and each keeps its own answer (a key whose value is of another type does not fail the others)', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client() });
    const inspector = own.client();
    const keys = Array.from({ length: 50 }, (_, i) => uniq(`tick-${i}`));
    for (const key of keys) await cache.getOrCompute(key, () => `v:${key}`, 60_000);
    const readEvents = async () => Number(/total_reads_processed:(\d+)/.exec(await inspector.info('stats'))![1]);
    const before = await readEvents();
    let runs = 0;
    const values = await Promise.all(
      keys.map((key) =>
        cache.getOrCompute(key, () => {
          runs++;
          return 'recomputed';
        }, 60_000),
      ),
    );
    const events = (await readEvents()) - before;
    expect(values).toEqual(keys.map((key) => `v:${key}`));
    expect(runs).toBe(0);
    // 50 GETs and the INFO: one write for the first GET, one pipeline for the other 49.
    expect(events, `read events on the server for 50 hit reads`).toBeLessThanOrEqual(6);

    // One key's value replaced by a list: its GET fails with WRONGTYPE inside the pipeline,
    // that call alone goes the full way (looks past the foreign value and loads); the others hit.
    await inspector.del(`dogpile:v:{${keys[7]!}}`);
    await inspector.lpush(`dogpile:v:{${keys[7]!}}`, 'foreign');
    const again = await Promise.all(keys.map((key) => cache.getOrCompute(key, () => 'recomputed', 60_000)));
    expect(again.filter((v) => v === 'recomputed')).toHaveLength(1);
    expect(again[7]).toBe('recomputed');
    await cache.close();
    await own.stop();
  });

  it('get/set/delete reject with BackendError when Redis is unreachable', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client({ maxRetriesPerRequest: 0, enableOfflineQueue: false }), commandTimeout: 200 });
    await own.kill();
    await expect(cache.get('k')).rejects.toMatchObject({ code: 'E_BACKEND' });
    await expect(cache.set('k', 1, 1000)).rejects.toMatchObject({ code: 'E_BACKEND' });
    await cache.close();
    await own.stop();
  });
});

describe('default cache and cacheWithoutDogpiling', () => {
  it('work in one process with no Redis and can be replaced', async () => {
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(20);
      return 'v';
    };
    const key = uniq('default');
    const values = await Promise.all(Array.from({ length: 10 }, () => cacheWithoutDogpiling(key, loader, '1m')));
    expect(values).toEqual(Array(10).fill('v'));
    expect(await getOrCompute(key, loader, 1000)).toBe('v');
    expect(runs).toBe(1);
    const previous = getDefaultCache();
    const onRedis = createCache({ redis });
    setDefaultCache(onRedis);
    expect(getDefaultCache()).toBe(onRedis);
    await getOrCompute(key, () => 'redis', 10_000);
    expect(await onRedis.get(key)).toBe('redis');
    setDefaultCache(previous);
    expect(() => setDefaultCache({} as never)).toThrow(/Invalid cache/);
    await onRedis.close();
  });

  it('two caches made from a URL coordinate from their first call (no lost subscribe while connecting)', async () => {
    const a = createCache({ redis: server.url, ...ANNOUNCED });
    const b = createCache({ redis: server.url, ...ANNOUNCED });
    const key = uniq('fresh-url');
    const coalesced = record(b, 'coalesced');
    const g = gate();
    let runs = 0;
    const loader = async () => {
      runs++;
      g.running = true;
      await g.opened;
      return 'once';
    };
    const first = a.getOrCompute(key, loader, 10_000);
    await waitUntil('the first cache leads', () => g.running);
    const before = await scriptsRun();
    const second = b.getOrCompute(key, loader, 10_000);
    await asleep(b, key, coalesced, before);
    const started = performance.now();
    g.open();
    expect(await Promise.all([first, second])).toEqual(['once', 'once']);
    // The second cache heard the announcement on the subscription made while connecting.
    expect(performance.now() - started).toBeLessThan(WOKEN_WITHIN_MS);
    expect(runs).toBe(1);
    await a.close();
    await b.close();
  });

  it('a cache made from a URL closes its own client', async () => {
    const cache = createCache({ redis: server.url });
    expect(await cache.getOrCompute(uniq('url'), () => 1, 1000)).toBe(1);
    await cache.close();
  });
});

/** Rejects if `promise` is still pending after `ms` (a generous bound, not a timing assertion). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** A loader that runs until the test lets it go. */
function hungLoader<T>(value: T) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let runs = 0;
  const loader = async () => {
    runs++;
    await gate;
    return value;
  };
  return { loader, release, runs: () => runs };
}

describe('waits run on a monotonic clock', () => {
  it('commandTimeout still cuts a hung Redis call short after the wall clock steps back one hour', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client(), commandTimeout: 200, backendCooldown: 50 });
    const backendErrors = record(cache, 'backendError');
    await cache.set('warm', 1, 1000);
    await own.debugSleepInBackground(3000);
    const call = cache.resolve(uniq('clockstep-cmd'), () => 'computed', 60_000);
    await sleep(50);
    const realNow = Date.now.bind(Date);
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 3_600_000);
    let r;
    try {
      r = await call;
    } finally {
      spy.mockRestore();
    }
    // cut short by commandTimeout, not answered once the server woke up
    expect(r).toMatchObject({ value: 'computed', degraded: true });
    expect(backendErrors[0]?.error.message).toMatch(/commandTimeout/);
    await sleep(3000);
    await cache.close();
    await own.stop();
  });

  it('a 1 s waitTimeout still fires after the wall clock steps back one hour', async () => {
    const a = createCache({ redis });
    const b = createCache({ redis: server.client(), waitTimeout: 1000 });
    const key = uniq('clockstep');
    const hung = hungLoader('late');
    const leader = a.getOrCompute(key, hung.loader, 10_000);
    await sleep(50);
    const waiter = b.getOrCompute(key, () => 'b', 10_000).catch((e: unknown) => e);
    await sleep(100);
    const realNow = Date.now.bind(Date);
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 3_600_000);
    try {
      expect(await within(waiter, 10_000, 'the waiter')).toBeInstanceOf(WaitTimeoutError);
    } finally {
      spy.mockRestore();
      hung.release();
    }
    expect(await leader).toBe('late');
    await a.close();
    await b.close();
  });
});

describe.each(kinds)('%s: callers in the leader process', (_label, make) => {
  it('waitTimeout and signal bound a wait for this process own loader run', async () => {
    const cache = make();
    const key = uniq('samewait');
    const timeouts = record(cache, 'waitTimeout');
    const hung = hungLoader('leader');
    const leader = cache.resolve(key, hung.loader, 10_000);
    await sleep(30);
    const thrown = cache.resolve(key, () => 'x', { ttl: 10_000, waitTimeout: 200 }).catch((e: unknown) => e);
    expect(await within(thrown, 5000, 'onWaitTimeout: throw')).toBeInstanceOf(WaitTimeoutError);
    const ac = new AbortController();
    const aborted = cache.resolve(key, () => 'y', { ttl: 10_000, signal: ac.signal }).catch((e: unknown) => e);
    setTimeout(() => ac.abort(), 50);
    const abortedWith = await within(aborted, 5000, 'signal');
    expect(String(abortedWith)).toMatch(/aborted/);
    // 'load' runs this caller's own loader (and stores its result, as documented)
    const own = cache.resolve(key, () => 'own', { ttl: 10_000, waitTimeout: 200, onWaitTimeout: 'load' });
    expect(await within(own, 5000, "onWaitTimeout: 'load'")).toMatchObject({ value: 'own', status: 'pass' });
    expect(timeouts.map((t) => t.key)).toEqual([key, key]);
    // the leader's own call waits for its own loader, however long that takes
    hung.release();
    expect(await leader).toMatchObject({ value: 'leader', status: 'miss' });
    expect(hung.runs()).toBe(1);
    await cache.close();
  });
});

describe('a foreign value under one key', () => {
  it('a value of another Redis type is that key miss and a corrupt event; every other key keeps coordinating', async () => {
    const cache = createCache({ redis: server.client() });
    const backendErrors = record(cache, 'backendError');
    const corrupt = record(cache, 'corrupt');
    const bad = uniq('wrongtype');
    await redis.hset(`dogpile:v:{${bad}}`, 'field', 'not ours');
    let runs = 0;
    const loader = async () => {
      runs++;
      await sleep(30);
      return 'computed';
    };
    const first = await Promise.all(Array.from({ length: 5 }, () => cache.resolve(bad, loader, 10_000)));
    expect(first.map((r) => r.value)).toEqual(Array(5).fill('computed'));
    expect(first.every((r) => !r.degraded)).toBe(true);
    expect(runs).toBe(1);
    expect(corrupt.map((c) => c.key)).toEqual([bad]);
    expect(String(corrupt[0]!.error)).toMatch(/WRONGTYPE/);
    // the miss led through Redis: the key now holds the loader's value
    expect(await redis.type(`dogpile:v:{${bad}}`)).toBe('string');
    expect(await cache.resolve(bad, loader, 10_000)).toMatchObject({ value: 'computed', status: 'hit' });
    // right after, another key still coordinates through Redis
    const other = uniq('neighbour');
    const second = await cache.resolve(other, () => 'other', 10_000);
    expect(second).toMatchObject({ value: 'other', status: 'miss', degraded: false });
    expect(await redis.exists(`dogpile:v:{${other}}`)).toBe(1);
    expect(backendErrors).toEqual([]);
    await cache.close();
  });

  it('an error reply about the server, not the key (NOREPLICAS: writes refused), still counts as Redis unavailable', async () => {
    const cache = createCache({ redis: server.client() });
    const backendErrors = record(cache, 'backendError');
    const corrupt = record(cache, 'corrupt');
    await redis.config('SET', 'min-replicas-to-write', '1');
    try {
      const r = await cache.resolve(uniq('noreplicas'), () => 'local', 10_000);
      expect(r).toMatchObject({ value: 'local', degraded: true });
    } finally {
      await redis.config('SET', 'min-replicas-to-write', '0');
    }
    expect(backendErrors.map((e) => String(e.error.cause))).toEqual([expect.stringMatching(/NOREPLICAS/)]);
    expect(corrupt).toEqual([]);
    await cache.close();
  });

  it('a value replaced by another Redis type while this process believes it fresh: still a miss, not an outage', async () => {
    const cache = createCache({ redis: server.client() });
    const backendErrors = record(cache, 'backendError');
    const corrupt = record(cache, 'corrupt');
    const key = uniq('wrongtype-hint');
    expect(await cache.getOrCompute(key, () => 'v1', 10_000)).toBe('v1');
    await redis.del(`dogpile:v:{${key}}`);
    await redis.rpush(`dogpile:v:{${key}}`, 'a list');
    expect(await cache.get(key)).toBeUndefined();
    expect(await cache.resolve(key, () => 'v2', 10_000)).toMatchObject({ value: 'v2', status: 'miss', degraded: false });
    expect(corrupt.length).toBeGreaterThanOrEqual(2);
    expect(corrupt.every((c) => c.key === key)).toBe(true);
    const other = uniq('neighbour');
    expect(await cache.resolve(other, () => 'o', 10_000)).toMatchObject({ status: 'miss', degraded: false });
    expect(backendErrors).toEqual([]);
    await cache.close();
  });
});

describe('a lock key without an expiry', () => {
  it.each([
    ['a string set by another program', (k: string) => redis.set(k, 'someone else')],
    ['a hash', (k: string) => redis.hset(k, 'f', 'v')],
  ])('(%s) is given one and reported; the key is computed once it runs out', async (_label, plant) => {
    const cache = createCache({ redis: server.client(), lockTtl: 300, waitTimeout: 3000 });
    const corrupt = record(cache, 'corrupt');
    const key = uniq('nottl');
    const lockKey = `dogpile:l:{${key}}`;
    await plant(lockKey);
    expect(await redis.pttl(lockKey)).toBe(-1);
    const results = await Promise.all(Array.from({ length: 3 }, () => cache.resolve(key, () => 'computed', 10_000)));
    expect(results.map((r) => r.value)).toEqual(['computed', 'computed', 'computed']);
    expect(results.filter((r) => r.status === 'miss')).toHaveLength(1);
    expect(corrupt.length).toBeGreaterThanOrEqual(1);
    expect(String(corrupt[0]!.error)).toMatch(/no expiry/);
    expect(await redis.get(`dogpile:v:{${key}}`)).not.toBeNull();
    await cache.close();
  });

  it('a PERSISTed lock of a live leader keeps that leader: its renewals keep the new expiry', async () => {
    const a = createCache({ redis, lockTtl: 300 });
    const b = createCache({ redis: server.client(), lockTtl: 300, waitTimeout: 5000 });
    const corrupt = record(b, 'corrupt');
    const key = uniq('persisted');
    let runs = 0;
    const leader = a.getOrCompute(key, async () => {
      runs++;
      await redis.persist(`dogpile:l:{${key}}`);
      await sleep(800);
      return 'leader';
    }, 10_000);
    await sleep(50);
    expect(await b.getOrCompute(key, () => 'b', 10_000)).toBe('leader');
    expect(await leader).toBe('leader');
    expect(runs).toBe(1);
    expect(corrupt.map((c) => c.key)).toEqual([key]);
    await a.close();
    await b.close();
  });
});

describe('cacheable decision with its own ttl', () => {
  it("stores the result for the decision's ttl instead of the call's, and refuses a bad one", async () => {
    const cache = createCache();
    try {
      const key = `own-ttl-${Math.random()}`;
      const result = await cache.resolve(key, () => 'v', { ttl: 60_000, cacheable: () => ({ decision: 'store', ttl: 40 }) });
      expect(result.status).toBe('miss');
      expect(await cache.get(key)).toBe('v');
      await new Promise((r) => setTimeout(r, 200));
      expect(await cache.get(key)).toBeUndefined();
      await expect(
        cache.resolve(`${key}-bad`, () => 'v', { ttl: 60_000, cacheable: () => ({ decision: 'store', ttl: 0 }) }),
      ).rejects.toThrow(/Invalid cacheable/);
    } finally {
      await cache.close();
    }
  });
});

describe('adaptive linger of wake-up channels', () => {
  it('a channel waited on again soon after it was dropped stays subscribed longer the next time', async () => {
    const client = server.client();
    const watcher = server.client();
    const channel = `linger-${Math.random().toString(36).slice(2)}`;
    const subscribers = async () => ((await watcher.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1];
    const sub = sharedSubscriber(client);
    // First wait: the channel lingers CHANNEL_LINGER_MS after it, then is dropped.
    (await sub.listen(channel, () => {}))();
    await waitUntil('the channel to be dropped after its linger', async () => (await subscribers()) === 0, CHANNEL_LINGER_MS + 5_000);
    // Waited on again right away: the next linger is twice as long.
    const again = sharedSubscriber(client);
    (await again.listen(channel, () => {}))();
    const left = performance.now();
    await sleep(CHANNEL_LINGER_MS * 1.3);
    // A timer never fires early: still subscribed past the base linger.
    expect(await subscribers()).toBe(1);
    await waitUntil('the channel to be dropped after its doubled linger', async () => (await subscribers()) === 0, 2 * CHANNEL_LINGER_MS + 5_000);
    expect(performance.now() - left).toBeGreaterThanOrEqual(2 * CHANNEL_LINGER_MS - 5);
  });

  it('a channel back later than its linger but within twice it after the drop also lingers twice as long (a process that waits on every other refresh)', async () => {
    const client = server.client();
    const watcher = server.client();
    const channel = `linger-late-${Math.random().toString(36).slice(2)}`;
    const subscribers = async () => ((await watcher.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1];
    const sub = sharedSubscriber(client);
    (await sub.listen(channel, () => {}))();
    await waitUntil('the channel to be dropped after its linger', async () => (await subscribers()) === 0, CHANNEL_LINGER_MS + 5_000);
    // Back 1.2 linger after the drop (and so after the drop was seen).
    await sleep(CHANNEL_LINGER_MS * 1.2);
    (await sharedSubscriber(client).listen(channel, () => {}))();
    await sleep(CHANNEL_LINGER_MS * 1.3);
    expect(await subscribers()).toBe(1);
    await waitUntil('the channel to be dropped after its doubled linger', async () => (await subscribers()) === 0, 2 * CHANNEL_LINGER_MS + 5_000);
  });
});

describe('plain callers joining a flight of this process (a key, a loader, a TTL)', () => {
  it('share its value, its error, or run their own loader for a private result; one run each time', async () => {
    const cache = createCache();
    let runs = 0;
    const slow = (value: unknown, fail = false) => async () => {
      runs++;
      await sleep(30);
      if (fail) throw new TypeError('boom');
      return value;
    };
    const values = await Promise.all(Array.from({ length: 500 }, () => cache.getOrCompute('plain-v', slow('v'), 10_000)));
    expect(new Set(values)).toEqual(new Set(['v']));
    expect(runs).toBe(1);

    runs = 0;
    const failed = await Promise.allSettled(Array.from({ length: 50 }, () => cache.getOrCompute('plain-e', slow('x', true), 10_000)));
    expect(failed.every((r) => r.status === 'rejected' && (r.reason as Error).message === 'boom')).toBe(true);
    expect(runs).toBe(1);

    runs = 0;
    const mine = createCache({ hitForMissTtl: 0 });
    const priv = await Promise.all(
      Array.from({ length: 5 }, (_, i) => mine.getOrCompute('plain-p', async () => ({ i, run: ++runs }), { ttl: 10_000, cacheable: () => 'private' }).then((v) => v)),
    );
    expect(priv.map((v) => v.i)).toEqual([0, 1, 2, 3, 4]);
    await cache.close();
    await mine.close();
  });

  it('are bounded by the cache\'s waitTimeout: WaitTimeoutError, or their own run with onWaitTimeout: "load"', async () => {
    const throwing = createCache({ waitTimeout: 100 });
    const leader = throwing.getOrCompute('plain-t', () => sleep(400).then(() => 'late'), 10_000);
    const joiners = Array.from({ length: 20 }, () => throwing.getOrCompute('plain-t', () => 'mine', 10_000));
    const settled = await Promise.allSettled(joiners);
    expect(settled.every((r) => r.status === 'rejected' && r.reason instanceof WaitTimeoutError)).toBe(true);
    expect(await leader).toBe('late');

    const loading = createCache({ waitTimeout: 100, onWaitTimeout: 'load' });
    const first = loading.getOrCompute('plain-l', () => sleep(400).then(() => 'late'), 10_000);
    await sleep(5);
    // Joined at different times: each is bounded from its own join.
    const early = loading.getOrCompute('plain-l', () => 'early', 10_000);
    await sleep(50);
    const later = loading.getOrCompute('plain-l', () => 'later', 10_000);
    expect(await early).toBe('early');
    expect(await later).toBe('later');
    expect(await first).toBe('late');
    await throwing.close();
    await loading.close();
  });
});

describe('plain callers of the leading process', () => {
  it('are answered once the value is on its way to Redis, not after Redis answers the commit', async () => {
    const own = await startRedis();
    const probe = own.client();
    const cache = createCache({ redis: own.client(), commandTimeout: 5_000 });
    try {
      const key = uniq('leader-early');
      let release!: () => void;
      const order: string[] = [];
      const first = cache.getOrCompute(key, () => new Promise<string>((resolve) => (release = () => resolve('v'))), 60_000).then((v) => {
        order.push('first');
        return v;
      });
      const joined = Array.from({ length: 10 }, () =>
        cache.getOrCompute(key, () => 'not-mine', 60_000).then((v) => {
          order.push('joiner');
          return v;
        }),
      );
      await waitUntil('the loader runs', () => release !== undefined);
      // Redis stops answering; the probe's PING is answered when it resumes.
      await own.clientPause(400);
      const resumed = probe.ping().then(() => order.push('resumed'));
      release();
      expect(await Promise.all(joined)).toEqual(Array.from({ length: 10 }, () => 'v'));
      expect(await first).toBe('v');
      await resumed;
      // The joiners had their value while the commit waited; the caller that started the flight
      // is answered with the commit's outcome (after Redis resumed).
      expect(order.slice(0, 10)).toEqual(Array.from({ length: 10 }, () => 'joiner'));
      expect(order.indexOf('first')).toBeGreaterThan(order.indexOf('resumed'));
      // The commit went through: the value is stored.
      expect(await cache.getOrCompute(key, () => 'again', 60_000)).toBe('v');
    } finally {
      await cache.close();
      await own.stop();
    }
  });
});

describe('plain callers waiting on another process', () => {
  it('are answered from the announcement itself, before the flight finishes its own steps; callers joining after that get the value too', async () => {
    // Two caches on their own connections: the leader's loader holds the key until released.
    const leaderClient = server.client();
    const leader = createCache({ redis: leaderClient });
    const waiting = createCache({ redis });
    const key = uniq('early-answer');
    let release!: () => void;
    const led = leader.getOrCompute(key, () => new Promise<string>((resolve) => (release = () => resolve('from-leader'))), 10_000);
    await waitUntil('the leader runs its loader', () => release !== undefined);

    const order: string[] = [];
    const first = waiting.getOrCompute(key, () => 'not-mine', 10_000).then((v) => {
      order.push('first');
      return v;
    });
    const late: Promise<string>[] = [];
    const joined = Array.from({ length: 20 }, (_, i) =>
      waiting.getOrCompute(key, () => 'not-mine', 10_000).then((v) => {
        order.push(`joiner ${i}`);
        // Joins the same flight after the early answer: answered when that flight settles.
        if (i === 0) late.push(waiting.getOrCompute(key, () => 'not-mine', 10_000));
        return v;
      }),
    );
    // The waiting cache is subscribed and sleeping on the key's channel.
    const { channel } = cacheKeys(waiting.options.prefix, key);
    await waitUntil('the waiting cache subscribes', async () => Number(((await redis.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]) > 0);
    // Its look-up after subscribing has been answered.
    await sleep(50);
    // A listener of the same channel on the same subscriber connection, after the waiting
    // cache's: a microtask it queues runs after every promise settled before it was called.
    const unlisten = await sharedSubscriber(redis).listen(channel, (message) => {
      if (message !== null) queueMicrotask(() => order.push('the message, one microtask later'));
    });
    release();
    expect(await led).toBe('from-leader');
    expect(await Promise.all(joined)).toEqual(Array.from({ length: 20 }, () => 'from-leader'));
    expect(await first).toBe('from-leader');
    expect(await Promise.all(late)).toEqual(['from-leader']);
    // The callers that joined the flight were answered by the message's listener itself; the
    // one whose call started the flight waits for the waiting step to finish and the hops back.
    expect(order.slice(0, 21)).toEqual([...Array.from({ length: 20 }, (_, i) => `joiner ${i}`), 'the message, one microtask later']);
    expect(order.indexOf('first')).toBeGreaterThan(20);
    unlisten();
    await leader.close();
    await waiting.close();
    leaderClient.disconnect();
  });
});

describe('hit events follow their listeners', () => {
  it('are emitted while a listener is attached, also after removeAllListeners() and with once()', async () => {
    const cache = createCache();
    await cache.getOrCompute('h', () => 1, 60_000);
    const seen: string[] = [];
    const listener = (e: { key: string }) => seen.push(`on ${e.key}`);
    cache.on('hit', listener);
    await cache.getOrCompute('h', () => 2, 60_000);
    expect(cache.peek('h')).toBe(1);
    cache.off('hit', listener);
    await cache.getOrCompute('h', () => 2, 60_000);
    cache.once('hit', (e) => seen.push(`once ${e.key}`));
    cache.peek('h');
    cache.peek('h');
    cache.on('hit', listener);
    cache.removeAllListeners();
    cache.peek('h');
    // Listeners attached after removeAllListeners() are still heard.
    cache.on('hit', (e) => seen.push(`after ${e.key}`));
    cache.peek('h');
    cache.removeAllListeners('hit');
    cache.peek('h');
    expect(seen).toEqual(['on h', 'on h', 'once h', 'after h']);
    await cache.close();
  });
});
