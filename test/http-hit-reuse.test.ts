/**
 * Hits of the same second share one prepared response (and its instructions, and its header
 * record for a `Response`): what they share must still follow the clock and the request. Real
 * apps over real sockets: Fastify, Express, Hono on `@hono/node-server`.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { createCache } from '../src/index.js';
import { dogpileGuard as expressGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { dogpileGuard as honoGuard } from '../src/hono/index.js';
import { get, type Reply } from '../tools/http-client.js';

const BODY = JSON.stringify({ items: [1, 2, 3] });
const ETAG = '"v1"';

interface App {
  port: number;
  runs: () => number;
  close: () => Promise<void>;
}

const apps: Record<string, () => Promise<App>> = {
  async fastify() {
    let runs = 0;
    const app = Fastify();
    await app.register(dogpileGuardPlugin, { cache: createCache(), ttl: '1m' });
    app.get('/item', async (_req, reply) => {
      runs++;
      void reply.header('etag', ETAG).header('content-type', 'application/json');
      return BODY;
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as AddressInfo).port, runs: () => runs, close: () => app.close() };
  },
  async express() {
    let runs = 0;
    const app = express();
    app.set('etag', false);
    app.get('/item', expressGuard({ cache: createCache(), ttl: '1m' }), (_req, res) => {
      runs++;
      res.set({ etag: ETAG, 'content-type': 'application/json' }).send(BODY);
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    return {
      port: (server.address() as AddressInfo).port,
      runs: () => runs,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  },
  async hono() {
    let runs = 0;
    const app = new Hono();
    app.use('/item', honoGuard({ cache: createCache(), ttl: '1m' }));
    app.get('/item', (c) => {
      runs++;
      return c.body(BODY, 200, { etag: ETAG, 'content-type': 'application/json' });
    });
    const server = await new Promise<{ server: ServerType; port: number }>((resolve) => {
      const s: ServerType = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve({ server: s, port: info.port }));
    });
    return {
      port: server.port,
      runs: () => runs,
      close: () => new Promise<void>((resolve) => server.server.close(() => resolve())),
    };
  },
};

const ttlOf = (reply: Reply) => Number(/ttl=(-?\d+)/.exec(String(reply.headers['cache-status']))?.[1]);

let open: App | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

describe.each(Object.keys(apps))('hits of the same second on %s', (name) => {
  it('carry the Age and Cache-Status ttl of their own second, and each request is still answered by its own headers', async () => {
    const app = (open = await apps[name]!());
    const miss = await get(app.port, '/item');
    expect(miss.xCache).toBe('MISS');

    const first = await get(app.port, '/item');
    const second = await get(app.port, '/item');
    for (const hit of [first, second]) {
      expect(hit.xCache).toBe('HIT');
      expect(hit.text).toBe(BODY);
      expect(hit.headers.etag).toBe(ETAG);
    }

    // A conditional request right after plain hits: a 304 for it, not the shared full response.
    const conditional = await get(app.port, '/item', { 'if-none-match': ETAG });
    expect(conditional.status).toBe(304);
    expect(conditional.body.length).toBe(0);
    // A HEAD: the hit's header fields, no body.
    const head = await get(app.port, '/item', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.xCache).toBe('HIT');
    expect(head.body.length).toBe(0);
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(BODY)));
    // A plain hit after those is still the full response.
    const again = await get(app.port, '/item');
    expect(again.status).toBe(200);
    expect(again.text).toBe(BODY);

    // Two seconds later the shared response is not reused: the Age has grown, the ttl shrunk.
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const later = await get(app.port, '/item');
    expect(later.xCache).toBe('HIT');
    expect(Number(later.headers.age)).toBeGreaterThanOrEqual(Number(first.headers.age) + 2);
    expect(ttlOf(later)).toBeLessThanOrEqual(ttlOf(first) - 2);
    expect(later.text).toBe(BODY);
    expect(app.runs()).toBe(1);
  });
});
