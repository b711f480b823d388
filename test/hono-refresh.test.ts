/**
 * Background refresh behind the Hono middleware, on `@hono/node-server` with real requests: with
 * `{ app }` a stale response is answered at once to every request and one refresh runs through
 * `app.fetch()` for a reconstructed request; without it the request that wins the refresh runs
 * the rest of the chain itself.
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/hono/index.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';

interface Started {
  port: number;
  runs: Array<Record<string, string>>;
  order: string[];
  release(): void;
  close(): Promise<void>;
}

/** `GET /r` behind the middleware; the second run (the refresh) waits for `release()` (or 5 s). */
async function start(withApp: boolean): Promise<Started> {
  const cache = createCache();
  const runs: Array<Record<string, string>> = [];
  const order: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const app = new Hono();
  app.use(dogpileGuard({ cache, ttl: 300, staleWhileRevalidate: '30s', ...(withApp ? { app } : {}) }));
  app.get('/r', async (c) => {
    const seen: Record<string, string> = {};
    c.req.raw.headers.forEach((value, name) => (seen[name] = value));
    runs.push(seen);
    const run = runs.length;
    if (run === 2) {
      await new Promise<void>((resolve) => {
        const bound = setTimeout(resolve, 5000);
        void released.then(() => {
          clearTimeout(bound);
          resolve();
        });
      });
      order.push('refresh ended');
    }
    return c.text(`run ${run}`);
  });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return {
    port: (server.address() as AddressInfo).port,
    runs,
    order,
    release,
    close: async () => {
      release();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await cache.close();
    },
  };
}

describe('Hono middleware: refresh', () => {
  it('with { app }, no request waits for the refresh: every STALE reply is complete before the background run ends, which sees none of the live fields', async () => {
    const app = await start(true);
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      await sleep(400);
      const replies = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const reply = await fetchReply(app.port, '/r', { headers: { 'x-request-id': 'live', 'x-forwarded-for': '10.0.0.1', 'user-agent': 'live-client' } });
          app.order.push('reply');
          return reply;
        }),
      );
      app.release();
      await waitUntil('the refresh ended', () => app.order.includes('refresh ended'));
      expect(replies.map((r) => r.headers['x-cache'])).toEqual(Array(8).fill('STALE'));
      expect(replies.map((r) => r.text)).toEqual(Array(8).fill('run 1'));
      expect(app.order).toEqual([...Array(8).fill('reply'), 'refresh ended']);
      expect(app.runs).toHaveLength(2);
      expect(Object.keys(app.runs[1]!)).toEqual(['host']);
      const after = await fetchReply(app.port, '/r');
      expect(after.headers['x-cache']).toBe('HIT');
      expect(after.text).toBe('run 2');
    } finally {
      await app.close();
    }
  });

  it('without { app }, the request that wins the refresh runs the chain in the foreground (X-Cache: MISS), the others get the stale copy', async () => {
    const app = await start(false);
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      await sleep(400);
      const replies = Promise.all(Array.from({ length: 4 }, () => fetchReply(app.port, '/r')));
      await sleep(100);
      app.release();
      const caches = (await replies).map((r) => r.headers['x-cache']).sort();
      expect(caches).toEqual(['MISS', 'STALE', 'STALE', 'STALE']);
    } finally {
      await app.close();
    }
  });

  it('a bad app is refused with InvalidOptionError naming app', () => {
    expect(() => dogpileGuard({ app: {} as never })).toThrow(InvalidOptionError);
    expect(() => dogpileGuard({ app: {} as never })).toThrow(/app/);
    expect(() => dogpileGuard({ app: null as never })).toThrow(/app/);
  });
});
