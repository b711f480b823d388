/**
 * One request identity for the key, the handler and the refresh, on every adapter, with raw
 * requests on real sockets:
 * - an absolute-form target whose authority is not the `Host` field's never fills the entry a
 *   plain request for the same path is served (Hono and `fetch` hand the handler the target's
 *   authority: the key has it and the `Host` field);
 * - a background refresh runs the handler for exactly the stored target: a path that starts
 *   with `//` stays a path at the app's own origin (Hono, `fetch`), dot segments raw or
 *   percent-encoded are not resolved (Express, Fastify, Koa, Nest on Express and on Fastify);
 * - query names that decode to one name (`%61` and `a`) are not reordered: `?%61=1&a=2` and
 *   `?a=2&%61=1`, which the app reads as different lists, get different entries.
 */
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { serve, type ServerType } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import 'reflect-metadata';
import { Controller, Get, Module, Req } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuard as expressGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { withDogpile } from '../src/fetch/index.js';
import { dogpileGuard as honoGuard } from '../src/hono/index.js';
import { dogpileGuard as koaGuard } from '../src/koa/index.js';
import { Cached, DogpileModule } from '../src/nest/index.js';
import { createCache, type DogpileCache } from '../src/index.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { rawRequest, type Reply } from '../tools/http-client.js';

type Kind = 'express' | 'fastify' | 'koa' | 'hono' | 'fetch' | 'nest-express' | 'nest-fastify';

/** What a handler run saw: the target as the framework gives it, and the query as the app reads it. */
interface Seen {
  target: string;
  query: unknown;
  method?: string;
}

interface App {
  port: number;
  /** Every handler run, in order. */
  seen: Seen[];
  close(): Promise<void>;
}

/** Fresh for 200 ms, then stale for a minute: a request after 200 ms is answered STALE and starts a background refresh. */
const GUARD = { ttl: 200, staleWhileRevalidate: '60s' } as const;

/**
 * One catch-all GET route. Its body names the target it saw and the query as the app reads it,
 * and, for `/secret` and `/e/private` (the routes a resolved dot segment would reach), SECRET.
 */
function body(run: number, target: string, query: unknown, path: string, method: string): string {
  const secret = path === '/secret' || path === '/e/private';
  return JSON.stringify({ route: secret ? 'SECRET' : 'catch-all', run, method, target, query });
}

const opened: App[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((app) => app.close()));
});

async function listen(server: http.Server | ServerType): Promise<number> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function closeServer(server: http.Server | ServerType): Promise<void> {
  (server as http.Server).closeAllConnections?.();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function start(kind: Kind): Promise<App> {
  const cache: DogpileCache = createCache();
  const seen: Seen[] = [];
  const run = (target: string, query: unknown, path: string, method: string) => {
    seen.push({ target, query, method });
    return body(seen.length, target, query, path, method);
  };
  let port: number;
  let stop: () => Promise<void>;
  if (kind === 'express') {
    const app = express();
    app.use(expressGuard({ cache, ...GUARD }));
    app.get(/.*/, (req, res) => {
      res.type('application/json').send(run(req.originalUrl, req.query, req.path, req.method));
    });
    const server = http.createServer(app);
    port = await listen(server);
    stop = () => closeServer(server);
  } else if (kind === 'fastify') {
    const app = Fastify();
    await app.register(dogpileGuardPlugin, { cache, ...GUARD });
    app.get('/*', (request, reply) => {
      const path = request.url.split('?')[0]!;
      void reply.type('application/json').send(run(request.url, request.query, path, request.method));
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as AddressInfo).port;
    stop = () => app.close();
  } else if (kind === 'koa') {
    const app = new Koa();
    app.use(koaGuard({ cache, ...GUARD }));
    app.use((ctx) => {
      ctx.type = 'application/json';
      ctx.body = run(ctx.originalUrl, ctx.query, ctx.path, ctx.method);
    });
    const server = http.createServer(app.callback());
    port = await listen(server);
    stop = () => closeServer(server);
  } else if (kind === 'hono' || kind === 'fetch') {
    const handler = (request: Request): Response => {
      const url = new URL(request.url);
      const text = run(request.url, [...url.searchParams], url.pathname, request.method);
      return new Response(text, { headers: { 'content-type': 'application/json' } });
    };
    let fetch: (request: Request) => Response | Promise<Response>;
    if (kind === 'hono') {
      const app = new Hono();
      app.use(honoGuard({ cache, ...GUARD, app }));
      app.get('*', (c) => handler(c.req.raw));
      fetch = app.fetch;
    } else {
      fetch = withDogpile(handler, { cache, ...GUARD });
    }
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' });
    port = await listen(server);
    stop = () => closeServer(server);
  } else {
    @Controller()
    class CatchAll {
      @Get(['d/:a/:b', 'e/:a/:b', 'secret', 'e/private', 'q', 'page'])
      @Cached(GUARD)
      all(@Req() req: { originalUrl?: string; url: string; query: unknown; method: string }): unknown {
        const target = req.originalUrl ?? req.url;
        return JSON.parse(run(target, req.query, target.split('?')[0]!, req.method));
      }
    }
    @Module({ imports: [DogpileModule.forRoot({ cache })], controllers: [CatchAll] })
    class AppModule {}
    const app = kind === 'nest-express' ? await NestFactory.create(AppModule, { logger: false }) : await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
    stop = () => app.close();
  }
  const app: App = {
    port,
    seen,
    close: async () => {
      await stop();
      await cache.close();
    },
  };
  opened.push(app);
  return app;
}

/** A GET of `target` written as it is on a socket, with `Host: 127.0.0.1:<port>` unless `host` is given. */
function send(app: App, target: string, host = `127.0.0.1:${app.port}`): Promise<Reply> {
  return rawRequest(app.port, `GET ${target} HTTP/1.1\r\nHost: ${host}`);
}

const ALL: Kind[] = ['express', 'fastify', 'koa', 'hono', 'fetch'];

describe('an absolute-form target whose authority is not the Host field', () => {
  it.each(ALL)('%s: never fills the entry a plain request for the same path is served', async (kind) => {
    const app = await start(kind);
    const poisoned = await send(app, 'http://evil.test/page?x=1');
    expect(poisoned.status).toBe(200);
    const plain = await send(app, '/page?x=1');
    expect(plain.status).toBe(200);
    expect(plain.text).not.toContain('evil.test');
    // The plain request ran its own handler: nothing stored by the first one answered it.
    expect(app.seen).toHaveLength(2);
    expect(plain.headers['x-cache']).toBe('MISS');
  });

  it.each(['hono', 'fetch'] as const)('%s: the handler sees the target authority and the Host field, so the request has an entry of its own, keyed by both', async (kind) => {
    const app = await start(kind);
    const first = await send(app, 'http://evil.test/page');
    const again = await send(app, 'http://evil.test/page');
    const otherHost = await send(app, 'http://evil.test/page', 'other.test');
    expect([first.headers['x-cache'], again.headers['x-cache'], otherHost.headers['x-cache']]).toEqual(['MISS', 'HIT', 'MISS']);
    expect(app.seen.map((s) => s.target)).toEqual(['http://evil.test/page', 'http://evil.test/page']);
  });

  it.each(['hono', 'fetch'] as const)('%s: an absolute-form target naming the Host field\'s authority is cached like the plain one', async (kind) => {
    const app = await start(kind);
    const host = `127.0.0.1:${app.port}`;
    expect((await send(app, `http://${host}/same`)).headers['x-cache']).toBe('MISS');
    const plain = await send(app, '/same');
    expect(plain.headers['x-cache']).toBe('HIT');
    expect(JSON.parse(plain.text).target).toBe(`http://${host}/same`);
  });
});

/**
 * Sends `target` (a miss), then again once stale (answered STALE, which starts the background
 * refresh), and returns the first reply served from the refresh's response.
 */
async function refreshed(app: App, target: string): Promise<Reply> {
  const runs = app.seen.length;
  expect((await send(app, target)).headers['x-cache']).toBe('MISS');
  await sleep(GUARD.ttl + 100);
  expect((await send(app, target)).headers['x-cache']).toBe('STALE');
  await waitUntil('the background refresh ran', () => app.seen.length >= runs + 2);
  return waitUntil('the refreshed entry is served', async () => {
    const reply = await send(app, target);
    return JSON.parse(reply.text).run >= runs + 2 ? reply : false;
  });
}

describe('a background refresh runs the handler for exactly the stored target', () => {
  it.each(['hono', 'fetch'] as const)('%s: a path that starts with // stays a path at the app\'s own origin', async (kind) => {
    const app = await start(kind);
    const origin = `http://127.0.0.1:${app.port}`;
    await refreshed(app, '//127.0.0.1:9/link');
    // Every run, the refresh included, saw the app's own origin and the path as sent.
    for (const run of app.seen) expect(run.target).toBe(`${origin}//127.0.0.1:9/link`);
  });

  it.each(['express', 'fastify', 'koa', 'nest-express', 'nest-fastify'] as const)('%s: dot segments, raw or percent-encoded, are not resolved', async (kind) => {
    const app = await start(kind);
    for (const target of ['/d/../secret', '/e/%2e%2e/private']) {
      const third = await refreshed(app, target);
      expect(JSON.parse(third.text).route).toBe('catch-all');
    }
    expect(app.seen.map((run) => run.target)).toEqual(['/d/../secret', '/d/../secret', '/e/%2e%2e/private', '/e/%2e%2e/private']);
  });
});

describe('query names that decode to one name', () => {
  it.each([...ALL, 'nest-express', 'nest-fastify'] as const)('%s: a percent-encoded name and its plain spelling, in either order, get different entries', async (kind) => {
    const app = await start(kind);
    const first = await send(app, '/q?%61=1&a=2');
    const second = await send(app, '/q?a=2&%61=1');
    expect(first.headers['x-cache']).toBe('MISS');
    expect(second.headers['x-cache']).toBe('MISS');
    expect(app.seen).toHaveLength(2);
    expect(JSON.parse(second.text).target).toBe(`${kind === 'hono' || kind === 'fetch' ? `http://127.0.0.1:${app.port}` : ''}/q?a=2&%61=1`);
    // Names that cannot decode to one another are still put in order: one entry for both orders.
    await send(app, '/q?b=1&c=2');
    const reordered = await send(app, '/q?c=2&b=1');
    expect(reordered.headers['x-cache']).toBe('HIT');
  });
});

describe('a HEAD that leads', () => {
  it.each(ALL)('%s: runs the handler as the GET it stands for, so the GET served from its entry is the GET response', async (kind) => {
    const app = await start(kind);
    const head = await rawRequest(app.port, `HEAD /m HTTP/1.1\r\nHost: 127.0.0.1:${app.port}`);
    expect(head.status).toBe(200);
    const get = await send(app, '/m');
    expect(get.headers['x-cache']).toBe('HIT');
    expect(JSON.parse(get.text).method).toBe('GET');
    expect(app.seen.map((run) => run.method)).toEqual(['GET']);
  });
});
