/**
 * On `@hono/node-server` the Hono middleware reads a request's header fields from the
 * `IncomingMessage` the server parsed (its `Request` is a lazy view over it), unless a
 * middleware before it replaced `c.req.raw`: then the fields are the new `Request`'s.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/hono/index.js';
import { createCache } from '../src/index.js';
import { fetchReply } from '../tools/http-client.js';

describe('Hono middleware on @hono/node-server: which header fields it reads', () => {
  it("keys and bypasses by the request the chain holds: a Request a middleware put in place of the server's is read, not the IncomingMessage", async () => {
    const cache = createCache();
    const app = new Hono();
    // Acts for a user: the request the rest of the chain sees carries credentials the client did not send.
    app.use(async (c, next) => {
      if (c.req.header('x-act-as') !== undefined) {
        const headers = new Headers(c.req.raw.headers);
        headers.set('authorization', `Bearer ${c.req.header('x-act-as')}`);
        c.req.raw = new Request(c.req.raw.url, { method: c.req.raw.method, headers });
      }
      await next();
    });
    app.use(dogpileGuard({ cache, ttl: '1m' }));
    let runs = 0;
    app.get('/me', (c) => {
      runs++;
      return c.text(`for ${c.req.header('authorization') ?? 'anyone'} (run ${runs})`);
    });
    const server: ServerType = await new Promise((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    const port = (server.address() as AddressInfo).port;
    try {
      const alice = await fetchReply(port, '/me', { headers: { 'x-act-as': 'alice' } });
      expect(alice.text).toBe('for Bearer alice (run 1)');
      expect(alice.headers['cache-status']).toMatch(/fwd=bypass; detail=authorization/);
      // Nothing was stored for Alice: an anonymous request runs the handler and gets its own response.
      const anonymous = await fetchReply(port, '/me');
      expect(anonymous.text).toBe('for anyone (run 2)');
      expect(anonymous.headers['x-cache']).toBe('MISS');
      // The server's own requests are cached as usual.
      const again = await fetchReply(port, '/me');
      expect(again.text).toBe('for anyone (run 2)');
      expect(again.headers['x-cache']).toBe('HIT');
      const bob = await fetchReply(port, '/me', { headers: { 'x-act-as': 'bob' } });
      expect(bob.text).toBe('for Bearer bob (run 3)');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await cache.close();
    }
  });
});
