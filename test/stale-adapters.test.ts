/**
 * The stale-serving options on the adapters, in one process with real HTTP requests: a
 * Fastify route's `config.dogpile`, the Express middleware's options, and their validation
 * (and `@Cached`'s). The claims across processes are in stale-http.test.ts and
 * nest-processes.test.ts.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { dogpileGuard } from '../src/express/index.js';
import { Cached } from '../src/nest/index.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { sleep } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';

function optionOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidOptionError) return error.option;
    throw error;
  }
  return undefined;
}

async function burst(port: number, path: string, n: number) {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const t0 = performance.now();
      const reply = await fetchReply(port, path);
      return { reply, ms: performance.now() - t0, done: performance.now() };
    }),
  );
}

describe('stale-serving options on the adapters', () => {
  it('Fastify: a route config.dogpile with staleWhileRevalidate serves STALE to all but the one request that runs the handler', async () => {
    const app = Fastify();
    // The request that wins the refresh runs the handler (the background refresh: http-refresh.test.ts).
    await app.register(dogpileGuardPlugin, { cache: createCache(), refresh: 'foreground' });
    let runs = 0;
    app.get('/r', { config: { dogpile: { ttl: 1000, staleWhileRevalidate: '10s' } } }, async () => {
      runs++;
      await sleep(400);
      return { runs };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    try {
      expect((await fetchReply(port, '/r')).headers['x-cache']).toBe('MISS');
      await sleep(1100);
      const replies = await burst(port, '/r', 10);
      const xCache = replies.map((r) => r.reply.headers['x-cache']);
      expect(xCache.filter((x) => x === 'MISS')).toHaveLength(1);
      expect(xCache.filter((x) => x === 'STALE')).toHaveLength(9);
      // Every STALE reply was complete before the one request that runs the handler.
      const refresher = replies.find((x) => x.reply.headers['x-cache'] === 'MISS')!;
      for (const r of replies.filter((x) => x.reply.headers['x-cache'] === 'STALE')) {
        expect(JSON.parse(r.reply.text)).toEqual({ runs: 1 });
        expect(Number(r.reply.headers.age)).toBeGreaterThanOrEqual(1);
        expect(r.done).toBeLessThan(refresher.done);
      }
      expect(runs).toBe(2);
      const after = await fetchReply(port, '/r');
      expect(after.headers['x-cache']).toBe('HIT');
      expect(JSON.parse(after.text)).toEqual({ runs: 2 });
    } finally {
      await app.close();
    }
  });

  it('Express: the middleware staleWhileRevalidate option serves STALE with an Age past the TTL', async () => {
    const app = express();
    app.use(dogpileGuard({ cache: createCache(), ttl: 1000, staleWhileRevalidate: '10s', refresh: 'foreground' }));
    let runs = 0;
    app.get('/r', async (_req, res) => {
      runs++;
      await sleep(400);
      res.json({ runs });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    try {
      await fetchReply(port, '/r');
      await sleep(1100);
      const replies = await burst(port, '/r', 10);
      const xCache = replies.map((r) => r.reply.headers['x-cache']);
      expect(xCache.filter((x) => x === 'MISS')).toHaveLength(1);
      expect(xCache.filter((x) => x === 'STALE')).toHaveLength(9);
      expect(runs).toBe(2);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("Express: a response's own directives win over the adapter's staleWhileRevalidate: must-revalidate is never served stale, stale-while-revalidate=N bounds the window", async () => {
    const app = express();
    app.use(dogpileGuard({ cache: createCache(), ttl: 60_000, staleWhileRevalidate: '10s', refresh: 'foreground' }));
    const runs = { strict: 0, short: 0 };
    app.get('/strict', async (_req, res) => {
      runs.strict++;
      await sleep(300);
      res.set('cache-control', 'max-age=1, must-revalidate').json({ runs: runs.strict });
    });
    app.get('/short', async (_req, res) => {
      runs.short++;
      await sleep(300);
      res.set('cache-control', 'max-age=1, stale-while-revalidate=1').json({ runs: runs.short });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    try {
      expect((await fetchReply(port, '/strict')).headers['x-cache']).toBe('MISS');
      expect((await fetchReply(port, '/short')).headers['x-cache']).toBe('MISS');
      await sleep(1300);
      // Past max-age: must-revalidate is not reused without the handler; the other one is
      // inside its own one-second stale window.
      const strict = await burst(port, '/strict', 5);
      expect(strict.map((r) => r.reply.headers['x-cache'])).not.toContain('STALE');
      for (const r of strict) expect(JSON.parse(r.reply.text)).toEqual({ runs: 2 });
      // One request of the burst refreshes it (MISS); the others get the stale copy.
      const short = await burst(port, '/short', 5);
      const stale = short.filter((r) => r.reply.headers['x-cache'] === 'STALE');
      expect(stale).toHaveLength(4);
      for (const r of stale) expect(r.reply.headers['cache-status']).toMatch(/; hit; ttl=-/);
      await sleep(2600);
      // The refreshed copy is past its max-age and its own one-second window (and well inside
      // the adapter's 10 s): no stale copy is left.
      const late = await burst(port, '/short', 5);
      expect(late.map((r) => r.reply.headers['x-cache'])).not.toContain('STALE');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("Express: a response's own stale-while-revalidate is served stale although the adapter has no stale window", async () => {
    const app = express();
    app.use(dogpileGuard({ cache: createCache(), ttl: 60_000, refresh: 'foreground' }));
    let runs = 0;
    app.get('/own', async (_req, res) => {
      runs++;
      await sleep(300);
      res.set('cache-control', 'max-age=1, stale-while-revalidate=30').json({ runs });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    try {
      expect((await fetchReply(port, '/own')).headers['x-cache']).toBe('MISS');
      await sleep(1300);
      // Past max-age, inside the response's own window: one request refreshes, the others get the stale copy at once.
      const burstReplies = await burst(port, '/own', 5);
      const stale = burstReplies.filter((r) => r.reply.headers['x-cache'] === 'STALE');
      expect(stale).toHaveLength(4);
      for (const r of stale) expect(JSON.parse(r.reply.text)).toEqual({ runs: 1 });
      expect(runs).toBe(2);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('bad stale-serving options on the adapters and @Cached throw InvalidOptionError naming the option', async () => {
    expect(optionOf(() => dogpileGuard({ staleIfError: Number.NaN }))).toBe('staleIfError');
    expect(optionOf(() => dogpileGuard({ softTimeout: 500, hardTimeout: 100 }))).toBe('softTimeout');
    expect(optionOf(() => Cached({ ttl: '1m', earlyRefresh: { beta: 0 } }))).toBe('earlyRefresh.beta');
    expect(optionOf(() => Cached({ ttl: '1m', staleWhileRevalidate: -5 }))).toBe('staleWhileRevalidate');
    const app = Fastify();
    await app.register(dogpileGuardPlugin, { cache: createCache() });
    // Before ready(): Fastify refuses routes added once it has started.
    expect(optionOf(() => app.get('/bad', { config: { dogpile: { ttl: 1000, hardTimeout: Number.POSITIVE_INFINITY } } }, async () => 'x'))).toBe(
      'config.dogpile.hardTimeout',
    );
    await app.close().catch(() => {});
    const bad = Fastify();
    const registered = await bad.register(dogpileGuardPlugin, { cache: createCache(), failSafeRetry: 0 }).then(() => undefined, (e: unknown) => e);
    expect((registered as InvalidOptionError).option).toBe('failSafeRetry');
    await bad.close().catch(() => {});
  });
});
