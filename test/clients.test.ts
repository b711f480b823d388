/**
 * The Redis clients the library accepts besides ioredis 5 (whose tests are the rest of the
 * suite; `DOGPILE_TEST_CLIENT` runs those on ioredis 6, iovalkey or node-redis): node-redis 5
 * and 6 given to `createCache`, `RedisLock` and `DogpileModule.forRoot`; a Redis URL, which
 * picks ioredis when it is installed and node-redis otherwise (proven in child processes where
 * the packages are made unavailable); and anything else, refused with the list of what is
 * accepted.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, RedisLock, withLock } from '../src/index.js';
import { DOGPILE_CACHE, DogpileModule, type DogpileCache } from '../src/nest/index.js';
import { cacheKeys } from '../src/store/key.js';
import { useRedis } from './support/use-redis.js';
import { startRedis } from '../tools/redis-server.js';
import { closeLibraryClient, IoRedis, nodeRedisClient } from '../tools/test-client.js';
import { NodeChild } from '../tools/child-process.js';
import { freshId, sleep } from '../tools/basics.js';

const server = useRedis();

describe.each([6, 5] as const)('node-redis %i', (version) => {
  it('createCache takes it: concurrent misses on two clients (two caches) run the loader once; binary values round-trip', async () => {
    const a = await nodeRedisClient(server.url, version);
    const b = await nodeRedisClient(server.url, version);
    const caches = [createCache({ redis: a, prefix: 'nr' }), createCache({ redis: b, prefix: 'nr' })];
    try {
      expect(caches.every((c) => c.distributed)).toBe(true);
      const key = freshId('nr');
      let runs = 0;
      const loader = async () => {
        runs++;
        await sleep(100);
        return { bytes: Buffer.from([0, 255, 1, 128]), text: 'é' };
      };
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => caches[i % 2]!.resolve(key, loader, 60_000)));
      expect(runs).toBe(1);
      for (const r of results) expect(Buffer.from(r.value.bytes)).toEqual(Buffer.from([0, 255, 1, 128]));
      expect(results.filter((r) => r.status === 'miss')).toHaveLength(1);
      expect(await server.command('EXISTS', cacheKeys('nr', key).value)).toBe(1);
      expect((await caches[1]!.get<{ text: string }>(key))?.text).toBe('é');
    } finally {
      for (const c of caches) await c.close();
      // The caches did not create the clients, so they left them open.
      expect([a.isOpen, b.isOpen]).toEqual([true, true]);
      await closeLibraryClient(a);
      await closeLibraryClient(b);
    }
  });

  it('RedisLock and withLock take it: a second holder waits for the release and gets the next fencing token', async () => {
    const client = await nodeRedisClient(server.url, version);
    try {
      const name = freshId('nr-lock');
      const first = new RedisLock(client, name, { ttl: 5000 });
      const token = await first.acquire();
      const order: string[] = [];
      const second = withLock(name, ({ fencingToken }) => {
        order.push('second');
        return fencingToken;
      }, { redis: client, timeout: 5000 });
      await sleep(100);
      order.push('first released');
      await first.release();
      expect(await second).toBe(token + 1);
      expect(order).toEqual(['first released', 'second']);
    } finally {
      await closeLibraryClient(client);
    }
  });

  it('DogpileModule.forRoot takes it: the module cache coordinates through that Redis and leaves the client open', async () => {
    const client = await nodeRedisClient(server.url, version);
    @Module({ imports: [DogpileModule.forRoot({ redis: client, prefix: 'nr-nest' })] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      const cache = app.get<DogpileCache>(DOGPILE_CACHE);
      expect(cache.distributed).toBe(true);
      const key = freshId('nr-nest');
      expect(await cache.getOrCompute(key, () => 'from nest', 60_000)).toBe('from nest');
      expect(await server.command('EXISTS', cacheKeys('nr-nest', key).value)).toBe(1);
    } finally {
      await app.close();
      expect(client.isOpen).toBe(true);
      await closeLibraryClient(client);
    }
  });
});

describe('node-redis when Redis fails', () => {
  it('keeps answering from the loader while Redis is down, and coordinates again once it is back', async () => {
    const own = await startRedis();
    const client = await nodeRedisClient(own.url);
    const cache = createCache({ redis: client, commandTimeout: 200, backendCooldown: 100 });
    const backendErrors: unknown[] = [];
    cache.on('backendError', (e) => backendErrors.push(e));
    try {
      const key = freshId('nr-down');
      expect(await cache.getOrCompute(key, () => 'first', 60_000)).toBe('first');
      await own.kill();
      let runs = 0;
      const values = await Promise.all(Array.from({ length: 10 }, () => cache.resolve(key, async () => {
        runs++;
        await sleep(20);
        return 'while-down';
      }, 60_000)));
      expect(values.every((v) => v.value === 'while-down' && v.degraded)).toBe(true);
      expect(runs).toBe(1);
      expect(backendErrors.length).toBeGreaterThan(0);
      await own.start();
      const until = performance.now() + 15_000;
      while (!client.isReady && performance.now() < until) await sleep(50);
      expect(client.isReady).toBe(true);
      await sleep(150); // past backendCooldown
      expect(await cache.getOrCompute(key, () => 'after', 60_000)).toBe('after');
      expect(await cache.getOrCompute(key, () => 'cached?', 60_000)).toBe('after');
      expect(await own.command('EXISTS', cacheKeys('dogpile', key).value)).toBe(1);
    } finally {
      await cache.close();
      await closeLibraryClient(client);
      await own.stop();
    }
  });
});

describe('a Redis URL', () => {
  const HIDE = 'test/fixtures/hide-packages.mjs';
  async function inChild(hide: string[]): Promise<{ loaded: string[]; value?: string; error?: { name: string; code: string; message: string } }> {
    const key = freshId('url');
    const child = NodeChild.tsx('test/fixtures/url-client.ts', [server.url, key], {
      nodeArgs: ['--import', `./${HIDE}`],
      env: { ...process.env, DOGPILE_HIDE_PACKAGES: hide.join(',') },
    });
    const line = await child.waitFor((l) => l.startsWith('{'), 60_000);
    await child.exited;
    return JSON.parse(line) as never;
  }

  it('uses ioredis when it is installed', async () => {
    expect(await inChild([])).toEqual({ loaded: ['ioredis'], value: 'stored' });
  });

  it('uses node-redis when ioredis is not installed', async () => {
    expect(await inChild(['ioredis'])).toEqual({ loaded: ['node-redis'], value: 'stored' });
  });

  it('without either package, createCache says which to install', async () => {
    const { loaded, error } = await inChild(['ioredis', 'redis']);
    expect(loaded).toEqual([]);
    expect(error).toMatchObject({ name: 'InvalidOptionError', code: 'E_INVALID_OPTION' });
    expect(error?.message).toMatch(/redis: a Redis URL needs the ioredis or the redis \(node-redis\) package/);
  });
});

describe('an object that is no accepted client', () => {
  const ACCEPTED = /Invalid redis: expected an ioredis or iovalkey Redis or Cluster instance, or a node-redis client \(createClient\(\) or createCluster\(\)\)/;
  // Lookalikes: a plain object, an object with some client methods, a node-redis client's
  // module (not a client), ioredis's constructor (not an instance).
  const wrong = [{}, { get: () => null, set: () => null }, { createClient: () => null }, IoRedis.Redis, 42];

  it('is refused by createCache with InvalidOptionError saying what is accepted; nothing is created', () => {
    for (const value of wrong) {
      expect(() => createCache({ redis: value as never })).toThrow(InvalidOptionError);
      expect(() => createCache({ redis: value as never })).toThrow(ACCEPTED);
    }
  });

  it('is refused by RedisLock, withLock and DogpileModule.forRoot the same way', async () => {
    for (const value of wrong) {
      expect(() => new RedisLock(value as never, 'x')).toThrow(ACCEPTED);
      await expect(withLock('x', () => 1, { redis: value as never })).rejects.toThrow(ACCEPTED);
    }
    @Module({ imports: [DogpileModule.forRoot({ redis: {} as never })] })
    class BadModule {}
    await expect(NestFactory.createApplicationContext(BadModule, { logger: false, abortOnError: false })).rejects.toThrow(ACCEPTED);
  });
});

describe('replicas with a node-redis client', () => {
  const server = useRedis();
  it('is refused with InvalidOptionError naming replicas, before anything is sent (WAIT needs the connection that took the lock)', async () => {
    const client = await nodeRedisClient(server.url, 6);
    try {
      for (const make of [() => createCache({ redis: client, replicas: 1 }), () => new RedisLock(client, 'x', { replicas: 'majority' })]) {
        let error: unknown;
        try {
          make();
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).toBe('replicas');
      }
      expect(await client.sendCommand(['DBSIZE'])).toBe(0);
    } finally {
      await closeLibraryClient(client);
    }
  });
});
