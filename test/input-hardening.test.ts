/**
 * Input the library must refuse or survive: keys, tags and lock names that would empty a
 * Redis Cluster hash tag, durations Node's timers cannot wait, unknown options, and the
 * classes of what it throws.
 */
import 'reflect-metadata';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { Controller, Get, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, DogpileError, errors, InvalidOptionError, lockKeys, MemoryLock, RedisLock, withLock } from '../src/index.js';
import { MAX_DURATION_MS, toMs } from '../src/shared/duration.js';
import { cacheKeys, tagKeys } from '../src/store/key.js';
import { keySlot } from '../src/redis/pubsub-mode.js';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { resolveCachedOptions, splitModuleOptions } from '../src/nest/options.js';
import { Cached, DogpileModule } from '../src/nest/index.js';
import { closest } from '../src/shared/known-options.js';
import { useRedis, useRedisCluster } from './support/use-redis.js';
import { freshId, waitUntil, sleep } from '../tools/basics.js';
import { killAllChildren } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';

afterEach(killAllChildren);

/** The error `fn` throws or rejects with (undefined when it succeeds). */
async function failure(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Expects `fn` to fail with an `InvalidOptionError` naming `option` (and a message matching `message`). */
async function refuses(fn: () => unknown, option: string, message?: RegExp): Promise<void> {
  const error = await failure(fn);
  expect(error, `expected InvalidOptionError naming ${option}`).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  if (message) expect((error as Error).message).toMatch(message);
}

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not met within 10 s');
    await sleep(20);
  }
}

const BRACED = ['}x', 'a}b{c', '{}', '}'];

describe('keys, tags and lock names with braces', () => {
  it('keep every Redis key of one id on one slot; ordinary ids keep their stored form', () => {
    for (const id of [...BRACED, 'user:1', 'a{b', '#x']) {
      const k = cacheKeys('dogpile', id);
      const slots = new Set([k.value, k.lock, k.channel, k.shared].map(keySlot));
      expect(slots.size, `keys of ${id}`).toBe(1);
      const t = tagKeys('dogpile', id);
      expect(keySlot(t.stamp), `tag ${id}`).toBe(keySlot(t.channel));
      const l = lockKeys('dogpile', id);
      expect(new Set([l.lock, l.fence, l.queue, l.channel].map(keySlot)).size, `lock ${id}`).toBe(1);
    }
    expect(cacheKeys('dogpile', 'user:1').value).toBe('dogpile:v:{user:1}');
    expect(cacheKeys('dogpile', 'a}b{c').value).toBe('dogpile:v:{a}b{c}');
    expect(cacheKeys('dogpile', '{}').value).toBe('dogpile:v:{{}}');
    expect(tagKeys('dogpile', 'product:7').stamp).toBe('dogpile:t:{product:7}');
    expect(lockKeys('dogpile', 'job').lock).toBe('dogpile:lock:{job}');
    expect(cacheKeys('dogpile', '}x').value).toMatch(/^dogpile:v:\{#[\w-]{43}\}$/);
    expect(cacheKeys('dogpile', '}x').value).not.toBe(cacheKeys('dogpile', '}').value);
  });

  describe('on a Redis Cluster', () => {
    const cluster = useRedisCluster(3);

    it.each(BRACED)('a stampede on %j from two clients runs the loader once', async (key) => {
      const a = createCache({ redis: cluster.client() });
      const b = createCache({ redis: cluster.client() });
      let runs = 0;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const loader = async () => {
        runs++;
        await gate;
        return `v-${key}`;
      };
      const first = a.getOrCompute(key, loader, 10_000);
      await until(async () => runs === 1);
      const others = Array.from({ length: 5 }, () => b.getOrCompute(key, loader, 10_000));
      // b waits on the key's channel (sharded pub/sub) before the lead is released.
      const channel = cacheKeys('dogpile', key).channel;
      const shardChannels = async () => (await Promise.all(cluster.nodes.map((n) => n.command('PUBSUB', 'SHARDCHANNELS') as Promise<string[]>))).flat();
      await until(async () => (await shardChannels()).includes(channel));
      release();
      expect(await Promise.all([first, ...others])).toEqual(Array(6).fill(`v-${key}`));
      expect(runs).toBe(1);
      expect(await b.get(key)).toBe(`v-${key}`);
      await a.close();
      await b.close();
    });

    it('invalidateTags on tags with braces reaches a tagged entry through another client', async () => {
      const a = createCache({ redis: cluster.client() });
      const b = createCache({ redis: cluster.client() });
      for (const tag of BRACED) {
        const key = `tagged-${freshId()}`;
        let runs = 0;
        const load = () => a.getOrCompute(key, () => ++runs, { ttl: 60_000, tags: [tag, 'plain'] });
        expect(await load()).toBe(1);
        expect(await load()).toBe(1);
        await b.invalidateTags([tag]);
        // Another client's invalidation reaches this one within one delivery.
        await waitUntil(`${tag} invalidated in the other client`, async () => (await a.get(key)) === undefined, 1_000);
        expect(await load()).toBe(2);
      }
      await a.close();
      await b.close();
    });

    it('locks named with braces exclude each other, hand over, and resetAll frees them', async () => {
      for (const name of BRACED) {
        const first = new RedisLock(cluster.client(), name);
        const second = new RedisLock(cluster.client(), name);
        const t1 = await first.acquire();
        const waiting = second.acquire({ timeout: 5000 });
        await first.release();
        expect(await waiting).toBe(t1 + 1);
        await second.release();
      }
      const client = cluster.client();
      const held = BRACED.map((name) => new RedisLock(client, name, { prefix: 'braced', autoRenew: false, ttl: 60_000 }));
      for (const l of held) await l.acquire();
      expect(await RedisLock.resetAll(client, { prefix: 'braced' })).toBe(BRACED.length);
      for (const l of held) expect(await l.getOwnerId()).toBeNull();
      for (const l of held) await l.release();
    });

    it('across processes: 2 cache processes × 10 calls on "}x" run the loader once', async () => {
      const key = `}x-${freshId()}`;
      const fleet = await Fleet.start('get-or-compute', 2, { url: '', cluster: cluster.startupNodes, key, loaderMs: 200, cache: { lockTtl: 5000, waitTimeout: 30_000 } });
      const results = (await fleet.run<{ value?: { pid: number; run: number } }>({ mode: 'burst', calls: 10 }, { timeoutMs: 60_000 })).flat();
      expect(results.every((r) => r.ok)).toBe(true);
      expect(new Set(results.map((r) => `${r.value?.pid}:${r.value?.run}`)).size).toBe(1);
      expect(await cluster.client().get(`${key}:runs`)).toBe('1');
      expect(await fleet.close(20_000)).toBe(true);
    });
  });
});

describe('durations of 2^31 ms or more', () => {
  const server = useRedis();
  const TOO_LONG = ['25d', MAX_DURATION_MS + 1, '2147483648ms', 3e10] as const;

  it('toMs accepts up to 2147483647 ms and refuses more, naming the option', async () => {
    expect(toMs(MAX_DURATION_MS, 'x')).toBe(2_147_483_647);
    expect(toMs('24d', 'x')).toBe(24 * 86_400_000);
    for (const value of TOO_LONG) await refuses(() => toMs(value, 'someOption'), 'someOption', /at most 2147483647 ms/);
  });

  it('every createCache duration option refuses one', async () => {
    for (const option of ['lockTtl', 'waitTimeout', 'commandTimeout', 'backendCooldown', 'hitForMissTtl', 'replicaTimeout', 'tagStampTtl', 'staleWhileRevalidate', 'staleIfError', 'failSafeRetry', 'softTimeout', 'hardTimeout']) {
      await refuses(() => createCache({ [option]: '25d' }), option);
    }
    await refuses(() => createCache({ redis: server.client(), l1: { ttl: '25d' } }), 'l1.ttl');
  });

  it('per call: nothing runs and nothing is written', async () => {
    const redis = server.client();
    const cache = createCache({ redis });
    let runs = 0;
    const loader = () => ++runs;
    for (const ttl of TOO_LONG) await refuses(() => cache.getOrCompute('k', loader, ttl as never), 'ttl');
    for (const option of ['ttl', 'lockTtl', 'waitTimeout', 'hitForMissTtl', 'staleWhileRevalidate', 'staleIfError', 'failSafeRetry', 'softTimeout', 'hardTimeout']) {
      await refuses(() => cache.getOrCompute('k', loader, { ttl: 1000, [option]: '25d' }), option);
    }
    await refuses(() => cache.getOrCompute('k', loader, { ttl: '25d', tags: ['t'] }), 'ttl');
    await refuses(() => cache.set('k', 1, '25d'), 'ttl');
    await refuses(() => cache.set('k', 1, { ttl: '25d', tags: ['t'] }), 'ttl');
    expect(runs).toBe(0);
    expect(await redis.dbsize()).toBe(0);
    // A hit is no excuse: the same arguments are refused on the fast path for hits too.
    expect(await cache.getOrCompute('k', loader, 60_000)).toBe(1);
    for (const ttl of TOO_LONG) await refuses(() => cache.getOrCompute('k', loader, ttl as never), 'ttl');
    await cache.close();
  });

  it('locks, withLock, the HTTP adapters and Nest refuse one', async () => {
    await refuses(() => new RedisLock(server.client(), 'l', { ttl: '25d' }), 'ttl');
    await refuses(() => new MemoryLock('l', { timeout: '25d' }), 'timeout');
    const lock = new MemoryLock(`l-${freshId()}`);
    await refuses(() => lock.acquire({ timeout: '25d' }), 'timeout');
    await lock.acquire();
    await refuses(() => lock.extend('25d'), 'ms');
    await lock.release();
    await refuses(() => withLock(`w-${freshId()}`, () => 1, { timeout: '25d' }), 'timeout');
    await refuses(() => dogpileGuard({ ttl: '25d' }), 'ttl');
    await refuses(() => dogpileGuard({ maxTtl: '25d' }), 'maxTtl');
    await refuses(() => dogpileGuard({ hardTimeout: '25d' }), 'hardTimeout');
    await refuses(() => resolveCachedOptions('25d'), 'ttl');
    await refuses(() => resolveCachedOptions({ softTimeout: '25d' }), 'softTimeout');
    await refuses(() => splitModuleOptions({ ttl: '25d' }), 'ttl');
  });
});

describe('unknown options', () => {
  const server = useRedis();

  it('suggest the closest known name', () => {
    expect(closest('tgas', ['ttl', 'tags'])).toBe('tags');
    expect(closest('TTL', ['max', 'ttl'])).toBe('ttl');
    expect(closest('lockTTL', ['lockTtl', 'ttl'])).toBe('lockTtl');
    expect(closest('zzzzzz', ['ttl', 'tags'])).toBeUndefined();
  });

  it('createCache refuses them at every level', async () => {
    await refuses(() => createCache({ lockTTL: 1000 } as never), 'lockTTL', /did you mean lockTtl\?/);
    await refuses(() => createCache({ redis: server.client(), l1: { TTL: 1000 } } as never), 'l1.TTL', /did you mean l1\.ttl\?/);
    await refuses(() => createCache({ redis: server.client(), l1: [] as never }), 'l1');
    await refuses(() => createCache({ earlyRefresh: { Beta: 2 } as never }), 'earlyRefresh.Beta', /did you mean earlyRefresh\.beta\?/);
  });

  it('a call refuses them: nothing runs, nothing is stored, nothing is invalidated', async () => {
    const redis = server.client();
    await redis.flushall();
    const cache = createCache({ redis, staleWhileRevalidate: 60_000 });
    let runs = 0;
    const loader = () => ++runs;
    await refuses(() => cache.getOrCompute('k', loader, { ttl: 1000, tgas: ['t'] } as never), 'tgas', /unknown option tgas \(did you mean tags\?\)/);
    await refuses(() => cache.getOrCompute('k', loader, { ttl: 1000, earlyRefresh: { Beta: 1 } } as never), 'earlyRefresh.Beta');
    await refuses(() => cache.set('k', 1, { ttl: 1000, tgas: ['t'] } as never), 'tgas', /did you mean tags\?/);
    expect(runs).toBe(0);
    expect(await redis.dbsize()).toBe(0);

    expect(await cache.getOrCompute('tagged', loader, { ttl: 60_000, tags: ['t'] })).toBe(1);
    await refuses(() => cache.invalidateTags(['t'], { Stale: true } as never), 'Stale', /did you mean stale\?/);
    // Refused before anything was written: the entry is still a fresh hit.
    expect(await cache.getOrCompute('tagged', loader, { ttl: 60_000, tags: ['t'] })).toBe(1);
    expect(runs).toBe(1);
    await cache.close();
  });

  it('locks and withLock refuse them', async () => {
    await refuses(() => new RedisLock(server.client(), 'l', { TTL: 1000 } as never), 'TTL', /did you mean ttl\?/);
    await refuses(() => new MemoryLock('l', { autorenew: false } as never), 'autorenew', /did you mean autoRenew\?/);
    await refuses(() => new MemoryLock('l', { replicas: 1 } as never), 'replicas');
    const lock = new MemoryLock(`l-${freshId()}`);
    await refuses(() => lock.acquire({ timout: 10 } as never), 'timout', /did you mean timeout\?/);
    expect(lock.isHeld).toBe(false);
    let ran = false;
    await refuses(() => withLock(`w-${freshId()}`, () => (ran = true), { timout: 10 } as never), 'timout', /did you mean timeout\?/);
    expect(ran).toBe(false);
    // withLock's own and both lock kinds' options are accepted.
    expect(await withLock(`w-${freshId()}`, () => 'done', { ttl: 1000, timeout: 1000, onReleaseError: () => {}, registry: undefined })).toBe('done');
    expect(await withLock(`w-${freshId()}`, () => 'done', { redis: server.client(), ttl: 1000, replicas: 0, onReleaseError: () => {} })).toBe('done');
  });

  it('the HTTP adapters and Nest refuse them', async () => {
    await refuses(() => dogpileGuard({ tll: '1s' } as never), 'tll', /did you mean ttl\?/);
    const app = Fastify();
    await app.register(dogpileGuardPlugin, { cache: createCache() });
    const routeError = await failure(async () => {
      app.get('/x', { config: { dogpile: { ttl: '1s', staleWhileRevalidat: '1m' } } as never }, () => 'x');
      await app.ready();
    });
    expect(routeError).toBeInstanceOf(InvalidOptionError);
    expect((routeError as InvalidOptionError).option).toBe('config.dogpile.staleWhileRevalidat');
    expect((routeError as Error).message).toMatch(/did you mean config\.dogpile\.staleWhileRevalidate\?/);
    await app.close();
    await refuses(() => resolveCachedOptions({ tll: 5 } as never), 'tll', /did you mean ttl\?/);
    await refuses(() => splitModuleOptions({ privateHeader: ['x-api-key'] } as never), 'privateHeader', /did you mean privateHeaders\?/);
    expect(splitModuleOptions({ ttl: 5, isGlobal: true, lockTtl: 100 } as never).defaults.ttl).toBe(5);
  });

  it('an adapter option that contradicts the cache is refused when the middleware is made', async () => {
    const cache = createCache({ hardTimeout: 100 });
    await refuses(() => dogpileGuard({ cache, softTimeout: 200 }), 'softTimeout', /hardTimeout/);
    expect(typeof dogpileGuard({ cache, softTimeout: 50 })).toBe('function');
    const app = Fastify();
    await refuses(() => app.register(dogpileGuardPlugin, { cache, softTimeout: 100 }).ready(), 'softTimeout');
    await app.close();
    const routes = Fastify();
    await routes.register(dogpileGuardPlugin, { cache });
    const routeError = await failure(async () => {
      routes.get('/x', { config: { dogpile: { ttl: '1s', softTimeout: 150 } } }, () => 'x');
      await routes.ready();
    });
    expect((routeError as InvalidOptionError).option).toBe('config.dogpile.softTimeout');
    await routes.close();
  });

  it('a @Cached option that contradicts the module cache is refused when the app starts', async () => {
    @Controller('slow')
    @Cached({ ttl: '1m', staleWhileRevalidate: '1m' })
    class SlowController {
      @Get()
      @Cached({ softTimeout: 200 })
      get(): string {
        return 'x';
      }
    }
    @Injectable()
    class SlowService {
      @Cached({ ttl: '1m', softTimeout: 300 })
      load(): string {
        return 'y';
      }
    }
    @Controller('fine')
    class FineController {
      @Get()
      @Cached({ ttl: '1m', softTimeout: 50 })
      get(): string {
        return 'z';
      }
    }
    const start = (hardTimeout: number, parts: { controllers?: (new () => unknown)[]; providers?: (new () => unknown)[] }) => {
      @Module({ imports: [DogpileModule.forRoot({ hardTimeout })], ...parts })
      class AppModule {}
      return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    };
    await refuses(() => start(100, { controllers: [SlowController] }), 'softTimeout', /@Cached of SlowController\.get/);
    await refuses(() => start(100, { providers: [SlowService] }), 'softTimeout', /@Cached of SlowService\.load/);
    const app = await start(100, { controllers: [FineController] });
    await app.close();
  });
});

describe('errors', () => {
  it('every class of the errors map is a DogpileError with its own code', () => {
    const codes = new Set<string>();
    for (const [name, Class] of Object.entries(errors)) {
      const error = Class === InvalidOptionError ? new InvalidOptionError('x', 'y') : new (Class as typeof DogpileError)('m');
      expect(error, name).toBeInstanceOf(DogpileError);
      expect(error.name).toBe(name);
      expect(error.code, name).toMatch(/^E_[A-Z_]+$/);
      expect(codes.has(error.code), `${name}: ${error.code} used twice`).toBe(false);
      codes.add(error.code);
    }
    expect(errors.SubscriberClosedError).toBeDefined();
    expect(errors.ReplicationError).toBeDefined();
  });

  it('nothing in src throws a plain Error or defines an error class outside DogpileError', () => {
    // Plain errors that never reach a caller as what it catches: a cause inside a
    // DogpileError, an internal signal caught before it leaves the library, a stream's error.
    const allowed = new Map<string, string>([
      ['src/lock/renewal.ts', "new Error('the last renewal has not been answered')"], // the cause of a LockLostError
      ['src/shared/errors.ts', 'new Error(remote.message)'], // a remote loader error rebuilt as a RemoteLoaderError's cause
      ['src/core/settled.ts', 'class AbandonedLoad extends Error'], // internal: a lead handed back without a result
      ['src/nest/handler-value.ts', 'class HandlerError extends Error'], // internal: unwrapped to the handler's own error
      ['src/http/flow/payload-capture.ts', "new Error('the response stream closed before its end')"], // destroys a response stream
      ['src/store/typed-reader.ts', 'new Error(this.text())'], // a stored Error value, decoded: the user's value, never thrown
    ]);
    const found: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts')) {
          readFileSync(path, 'utf8').split('\n').forEach((line, i) => {
            if (!/\bnew Error\(|\bextends Error\b/.test(line)) return;
            if (path === join('src', 'shared', 'errors.ts') && line.includes('class DogpileError extends Error')) return;
            const ok = allowed.get(path.split('\\').join('/'));
            if (ok !== undefined && line.includes(ok)) return;
            found.push(`${path}:${i + 1}: ${line.trim()}`);
          });
        }
      }
    };
    walk('src');
    expect(found).toEqual([]);
  });
});
