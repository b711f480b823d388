/**
 * Misconfigurations that used to degrade without a word are said at start-up, each naming its
 * fix: the Fastify plugin registered after its routes (or without `await`), a Hono middleware
 * with a stale window and no `app`, a node-redis client that is not connected. Real Fastify and
 * Hono apps on real sockets, real node-redis clients against a real Redis.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import Fastify, { type FastifyInstance } from 'fastify';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { dogpileGuard } from '../src/hono/index.js';
import { createCache, InvalidOptionError, RedisLock, withLock, type DogpileCache } from '../src/index.js';
import { cacheKeys } from '../src/store/key.js';
import { freshId } from '../tools/basics.js';
import { get } from '../tools/http-client.js';
import { nodeRedisModule } from '../tools/test-client.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

const CODES = new Set(['DOGPILE_FASTIFY_ORDER', 'DOGPILE_HONO_NO_APP']);

/** The library's start-up warnings emitted while `run` runs (process warnings are emitted on a later tick). */
async function warningsDuring(run: () => Promise<void>): Promise<Array<Error & { code?: string }>> {
  const seen: Array<Error & { code?: string }> = [];
  const listener = (warning: Error & { code?: string }) => {
    if (warning.code !== undefined && CODES.has(warning.code)) seen.push(warning);
  };
  process.on('warning', listener);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

const caches: DogpileCache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((cache) => cache.close()));
});

function redisCache(): DogpileCache {
  const cache = createCache({ redis: server.client(), prefix: freshId('startup') });
  caches.push(cache);
  return cache;
}

describe('Fastify: the plugin registered after the routes it should cache', () => {
  async function burst(app: FastifyInstance, path: string): Promise<{ runs: number; xCache: Array<string | undefined> }> {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await get(port, path));
    // A request sent right after the first one's reply may still join its run (the value is
    // on its way to the store): COALESCED, from that one run, is a cached answer as HIT is.
    return { runs: runsOf(app), xCache: replies.map((r) => (r.xCache === 'COALESCED' ? 'HIT' : r.xCache)) };
  }
  const runs = new WeakMap<FastifyInstance, number>();
  const runsOf = (app: FastifyInstance) => runs.get(app) ?? 0;
  function route(app: FastifyInstance, instance: FastifyInstance, path: string, config?: object): void {
    instance.get(path, config === undefined ? {} : { config }, async () => {
      runs.set(app, runsOf(app) + 1);
      return { path };
    });
  }

  it('registered after the routes: a warning at start-up that names the routes and says to register it first with await', async () => {
    const app = Fastify();
    try {
      const warnings = await warningsDuring(async () => {
        route(app, app, '/report');
        route(app, app, '/items/:id');
        await app.register(dogpileGuardPlugin, { cache: redisCache(), ttl: '30s' });
        await app.ready();
      });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.code).toBe('DOGPILE_FASTIFY_ORDER');
      expect(warnings[0]!.name).toBe('DogpileWarning');
      expect(warnings[0]!.message).toContain('await fastify.register(dogpileGuardPlugin');
      expect(warnings[0]!.message).toContain('before the routes');
      expect(warnings[0]!.message).toContain('GET /report');
      expect(warnings[0]!.message).toContain('GET /items/:id');
      // What it warns about: the route runs its handler every time, with no X-Cache.
      expect(await burst(app, '/report')).toEqual({ runs: 3, xCache: [undefined, undefined, undefined] });
    } finally {
      await app.close();
    }
  });

  it('registered without await before the routes: the same warning', async () => {
    const app = Fastify();
    try {
      const warnings = await warningsDuring(async () => {
        void app.register(dogpileGuardPlugin, { cache: redisCache(), ttl: '30s' });
        route(app, app, '/report');
        await app.ready();
      });
      expect(warnings.map((w) => w.code)).toEqual(['DOGPILE_FASTIFY_ORDER']);
      expect(warnings[0]!.message).toContain('await fastify.register(dogpileGuardPlugin');
      expect(warnings[0]!.message).toContain('GET /report');
    } finally {
      await app.close();
    }
  });

  it('registered with await before the routes: no warning, and the route is cached', async () => {
    const app = Fastify();
    try {
      const warnings = await warningsDuring(async () => {
        await app.register(dogpileGuardPlugin, { cache: redisCache(), ttl: '30s' });
        route(app, app, '/report');
        route(app, app, '/me', { dogpile: false });
        await app.ready();
      });
      expect(warnings).toEqual([]);
      expect(await burst(app, '/report')).toEqual({ runs: 1, xCache: ['MISS', 'HIT', 'HIT'] });
    } finally {
      await app.close();
    }
  });

  it('registered first in an encapsulated context: no warning about the routes outside it', async () => {
    const app = Fastify();
    try {
      const warnings = await warningsDuring(async () => {
        route(app, app, '/health');
        await app.register(async (api) => {
          await api.register(dogpileGuardPlugin, { cache: redisCache(), ttl: '30s' });
          route(app, api, '/report');
          route(app, api, '/');
        }, { prefix: '/api' });
        await app.ready();
      });
      expect(warnings).toEqual([]);
      expect(await burst(app, '/api/report')).toEqual({ runs: 1, xCache: ['MISS', 'HIT', 'HIT'] });
    } finally {
      await app.close();
    }
  });
});

describe('Hono: a stale window without { app }', () => {
  async function started(app: Hono): Promise<{ port: number; close(): Promise<void> }> {
    const s: ServerType = await new Promise((resolve) => {
      const made = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(made));
    });
    return { port: (s.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => s.close(() => resolve())) };
  }

  it('staleWhileRevalidate on the middleware: one warning when it is created, naming app; none per request', async () => {
    const app = new Hono();
    let http: { port: number; close(): Promise<void> } | undefined;
    try {
      const atCreation = await warningsDuring(async () => {
        app.use(dogpileGuard({ cache: redisCache(), ttl: '30s', staleWhileRevalidate: '1m' }));
      });
      expect(atCreation.map((w) => w.code)).toEqual(['DOGPILE_HONO_NO_APP']);
      expect(atCreation[0]!.name).toBe('DogpileWarning');
      expect(atCreation[0]!.message).toContain('dogpileGuard({ ..., app })');
      expect(atCreation[0]!.message).toContain('staleWhileRevalidate');
      const later = await warningsDuring(async () => {
        app.get('/r', (c) => c.text('r'));
        http = await started(app);
        for (let i = 0; i < 3; i++) await get(http.port, '/r');
      });
      expect(later).toEqual([]);
    } finally {
      await http?.close();
    }
  });

  it('a stale window from the response (stale-while-revalidate): one warning per middleware, at its first stored response', async () => {
    const app = new Hono();
    let http: { port: number; close(): Promise<void> } | undefined;
    try {
      const warnings = await warningsDuring(async () => {
        app.use(dogpileGuard({ cache: redisCache(), ttl: '30s' }));
        app.get('/r/:n', (c) => {
          c.header('Cache-Control', 'max-age=60, stale-while-revalidate=30');
          return c.text('r');
        });
        http = await started(app);
        for (let i = 0; i < 3; i++) await get(http.port, `/r/${i}`);
      });
      expect(warnings.map((w) => w.code)).toEqual(['DOGPILE_HONO_NO_APP']);
      expect(warnings[0]!.message).toContain('dogpileGuard({ ..., app })');
      expect(warnings[0]!.message).toContain('stale-while-revalidate');
    } finally {
      await http?.close();
    }
  });

  it('with app, with refresh: "foreground", or without a stale window: no warning', async () => {
    const app = new Hono();
    let http: { port: number; close(): Promise<void> } | undefined;
    try {
      const warnings = await warningsDuring(async () => {
        const cache = redisCache();
        app.use('/a/*', dogpileGuard({ cache, ttl: '30s', staleWhileRevalidate: '1m', app }));
        app.use('/f/*', dogpileGuard({ cache, ttl: '30s', staleWhileRevalidate: '1m', refresh: 'foreground' }));
        app.use('/n/*', dogpileGuard({ cache, ttl: '30s' }));
        app.get('/*', (c) => {
          if (c.req.path.startsWith('/f/')) c.header('Cache-Control', 'max-age=60, stale-while-revalidate=30');
          return c.text(c.req.path);
        });
        http = await started(app);
        for (const path of ['/a/1', '/f/1', '/n/1', '/n/2']) expect((await get(http.port, path)).xCache).toBe('MISS');
      });
      expect(warnings).toEqual([]);
    } finally {
      await http?.close();
    }
  });
});

describe.each([6, 5] as const)('node-redis %i: a client that is not connected', (version) => {
  it('is refused by createCache with InvalidOptionError naming redis and connect(); nothing is written', async () => {
    const client = nodeRedisModule(version).createClient({ url: server.url });
    const cluster = nodeRedisModule(version).createCluster({ rootNodes: [{ url: server.url }] });
    const keysBefore = await server.command('DBSIZE');
    for (const redis of [client, cluster]) {
      let error: unknown;
      try {
        createCache({ redis });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe('redis');
      expect((error as Error).message).toContain('await client.connect()');
      expect((error as Error).message).toContain('before createCache');
    }
    expect([client.isOpen, cluster.isOpen]).toEqual([false, false]);
    expect(await server.command('DBSIZE')).toBe(keysBefore);
  });

  it('is refused by new RedisLock, RedisLock.resetAll and withLock with InvalidOptionError naming redis and connect()', async () => {
    const client = nodeRedisModule(version).createClient({ url: server.url });
    const attempts: [string, () => unknown][] = [
      ['new RedisLock', () => new RedisLock(client, 'job')],
      ['RedisLock.resetAll', () => RedisLock.resetAll(client)],
      ['withLock', () => withLock('job', async () => 'ran', { redis: client })],
    ];
    for (const [what, attempt] of attempts) {
      let error: unknown;
      try {
        await attempt();
      } catch (e) {
        error = e;
      }
      expect(error, what).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option, what).toBe('redis');
      expect((error as Error).message, what).toContain('await client.connect()');
    }
    expect(client.isOpen).toBe(false);
  });

  it('a client still connecting (connect() called, not awaited) is accepted and coordinates through Redis', async () => {
    const client = nodeRedisModule(version).createClient({ url: server.url });
    client.on('error', () => {});
    const connecting = client.connect() as Promise<unknown>;
    try {
      expect(client.isOpen).toBe(true);
      expect(client.isReady).toBe(false);
      const prefix = freshId('connecting');
      const cache = createCache({ redis: client, prefix });
      try {
        const key = freshId('k');
        expect(await cache.getOrCompute(key, () => 'stored', 60_000)).toBe('stored');
        expect(await cache.get(key)).toBe('stored');
        expect(await server.command('EXISTS', cacheKeys(prefix, key).value)).toBe(1);
      } finally {
        await cache.close();
      }
    } finally {
      await connecting;
      client.destroy();
    }
  });
});
