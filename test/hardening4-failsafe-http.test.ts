/**
 * One failure rule at HTTP: a stale response's background refresh that the handler answers with
 * a 500 is a failed run, and holds the key for `failSafeRetry` fleet-wide without
 * `staleIfError` too. Meanwhile every request inside the stale window is answered with the
 * stored response (`X-Cache: STALE`) and no handler runs. Express, Fastify, Koa, Hono (on
 * `@hono/node-server`) and a `fetch` handler, over real sockets, on an in-process cache and on
 * a real Redis.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve as serveFetch, type ServerType } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { dogpileGuard as expressGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { withDogpile } from '../src/fetch/index.js';
import { dogpileGuard as honoGuard } from '../src/hono/index.js';
import { dogpileGuard as koaGuard } from '../src/koa/index.js';
import { createCache, type DogpileCache } from '../src/index.js';
import type { HttpCacheOptions } from '../src/http/options.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
/** Longer than any run of the test's requests takes, so that every one of them falls inside the hold. */
const FAIL_SAFE_RETRY = 60_000;

type Framework = 'express' | 'fastify' | 'koa' | 'hono' | 'fetch';
const FRAMEWORKS: Framework[] = ['express', 'fastify', 'koa', 'hono', 'fetch'];

/** The route's answer: `good` the first time, a 500 from then on. */
interface Origin {
  runs: number;
}
function answer(origin: Origin): { status: number; body: string } {
  origin.runs++;
  return origin.runs === 1 ? { status: 200, body: 'good' } : { status: 500, body: 'origin down' };
}

interface App {
  port: number;
  close(): Promise<void>;
}

const closeNode = (server: Server | ServerType) =>
  new Promise<void>((resolve) => {
    const s = server as Server;
    s.close(() => resolve());
    s.closeAllConnections();
  });

/** `GET /r` of `framework` behind its guard with `options`. */
async function start(framework: Framework, options: HttpCacheOptions<never>, origin: Origin): Promise<App> {
  const listenFetch = async (fetch: (request: Request) => Response | Promise<Response>): Promise<App> => {
    let server!: ServerType;
    const port = await new Promise<number>((resolve) => {
      server = serveFetch({ fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(info.port));
    });
    return { port, close: () => closeNode(server) };
  };
  switch (framework) {
    case 'express': {
      const app = express();
      app.use(expressGuard(options as HttpCacheOptions<never> as HttpCacheOptions<express.Request>));
      app.get('/r', (_req, res) => {
        const a = answer(origin);
        res.status(a.status).send(a.body);
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      return { port: (server.address() as AddressInfo).port, close: () => closeNode(server) };
    }
    case 'fastify': {
      const app = Fastify();
      await app.register(dogpileGuardPlugin, options as never);
      app.get('/r', async (_request, reply) => {
        const a = answer(origin);
        return reply.code(a.status).send(a.body);
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
    }
    case 'koa': {
      const app = new Koa();
      app.silent = true;
      app.use(koaGuard(options as never));
      app.use((ctx) => {
        const a = answer(origin);
        ctx.status = a.status;
        ctx.body = a.body;
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      return { port: (server.address() as AddressInfo).port, close: () => closeNode(server) };
    }
    case 'hono': {
      const app = new Hono();
      app.use(honoGuard({ ...(options as object), app }));
      app.get('/r', (c) => {
        const a = answer(origin);
        return c.text(a.body, a.status as 200);
      });
      return listenFetch(app.fetch);
    }
    case 'fetch':
      return listenFetch(
        withDogpile((_request: Request) => {
          const a = answer(origin);
          return new Response(a.body, { status: a.status });
        }, options as never),
      );
  }
}

const backends = [
  ['in-process cache', () => createCache()],
  ['Redis cache', () => createCache({ redis: redis.url, prefix: `h4-http-${Math.random().toString(36).slice(2)}:` })],
] as const;

describe.each(backends)('a refresh answered 500 holds the key for failSafeRetry without staleIfError (%s)', (_name, make) => {
  it.each(FRAMEWORKS)('%s: 10 requests during failSafeRetry run the handler once more at most, each answered with the stale body', async (framework) => {
    const cache: DogpileCache = make();
    const origin: Origin = { runs: 0 };
    const refreshEnds: string[] = [];
    cache.on('refresh', (info) => {
      if (info.phase === 'end') refreshEnds.push(info.outcome ?? '');
    });
    const app = await start(framework, { cache, ttl: 300, staleWhileRevalidate: '30s', failSafeRetry: FAIL_SAFE_RETRY } as HttpCacheOptions<never>, origin);
    try {
      const first = await fetchReply(app.port, '/r');
      expect([first.status, first.text, first.headers['x-cache']]).toEqual([200, 'good', 'MISS']);
      await sleep(400);
      const replies = [];
      for (let i = 0; i < 10; i++) {
        replies.push(await fetchReply(app.port, '/r'));
        await sleep(30);
      }
      await waitUntil('the refresh ended', () => refreshEnds.length >= 1);
      expect(origin.runs).toBeLessThanOrEqual(2);
      expect(replies.map((r) => [r.status, r.text, r.headers['x-cache']])).toEqual(Array(10).fill([200, 'good', 'STALE']));
      expect(refreshEnds).toEqual(['error']);
    } finally {
      await app.close();
      await cache.close();
    }
  });
});

describe.each(backends)('a foreground refresh answered 500 holds the key for failSafeRetry without staleIfError (%s)', (_name, make) => {
  it.each(FRAMEWORKS)('%s: the request that refreshes gets the 500, the next 9 the stale body, and the handler runs no more', async (framework) => {
    const cache: DogpileCache = make();
    const origin: Origin = { runs: 0 };
    const app = await start(framework, { cache, ttl: 300, staleWhileRevalidate: '30s', failSafeRetry: FAIL_SAFE_RETRY, refresh: 'foreground' } as HttpCacheOptions<never>, origin);
    try {
      expect((await fetchReply(app.port, '/r')).text).toBe('good');
      await sleep(400);
      const replies = [];
      for (let i = 0; i < 10; i++) replies.push(await fetchReply(app.port, '/r'));
      expect(origin.runs).toBe(2);
      expect(replies.map((r) => [r.status, r.text])).toEqual([[500, 'origin down'], ...Array(9).fill([200, 'good'])]);
      expect(replies.slice(1).map((r) => r.headers['x-cache'])).toEqual(Array(9).fill('STALE'));
    } finally {
      await app.close();
      await cache.close();
    }
  });
});
