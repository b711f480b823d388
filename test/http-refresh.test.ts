/**
 * Background refresh on the Express and Fastify adapters, with real apps and real HTTP
 * requests: inside a stale window every request is answered at once with the stale response,
 * and one refresh runs the route's handler for a request reconstructed from the stored one.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { dogpileGuard } from '../src/express/index.js';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import type { HttpCacheOptions } from '../src/http/options.js';
import { sleep, waitUntil } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { monotonicNow } from '../src/shared/clock.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();

type Headers = Record<string, string | string[] | undefined>;
interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
}
type Handler = (headers: Headers) => Promise<Answer> | Answer;

interface App {
  port: number;
  close(): Promise<void>;
}

/**
 * One route, `GET /r`, behind the adapter's guard. `admit`, when given, is a check in front of
 * the handler (a Fastify preHandler hook, an Express route middleware) that answers 401 when it
 * refuses the request.
 */
async function serve(framework: 'express' | 'fastify', options: HttpCacheOptions<never>, handler: Handler, admit?: (headers: Headers) => boolean): Promise<App> {
  if (framework === 'fastify') {
    const app = Fastify();
    await app.register(dogpileGuardPlugin, options as HttpCacheOptions<never> as HttpCacheOptions<FastifyRequest>);
    app.get(
      '/r',
      {
        preHandler: async (request, reply) => {
          if (admit !== undefined && !admit(request.headers)) await reply.code(401).send('refused');
        },
      },
      async (request, reply) => {
        const answer = await handler(request.headers);
        void reply.code(answer.status ?? 200).headers(answer.headers ?? {});
        return answer.status === 304 ? null : (answer.body ?? '');
      },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
  }
  const app = express();
  app.use(dogpileGuard(options as HttpCacheOptions<never> as HttpCacheOptions<express.Request>));
  app.get(
    '/r',
    (req, res, next) => {
      if (admit !== undefined && !admit(req.headers)) res.status(401).send('refused');
      else next();
    },
    async (req, res, next) => {
      try {
        const answer = await handler(req.headers);
        res.status(answer.status ?? 200).set(answer.headers ?? {});
        if (answer.status === 304) res.end();
        else res.send(answer.body ?? '');
      } catch (error) {
        next(error);
      }
    },
  );
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** Resolves with the outcome of the next refresh of the cache to end. */
function refreshEnded(cache: DogpileCache): Promise<string> {
  return new Promise((resolve) => {
    const listener = (info: { phase: string; outcome?: string }) => {
      if (info.phase !== 'end') return;
      cache.off('refresh', listener);
      resolve(info.outcome ?? '');
    };
    cache.on('refresh', listener);
  });
}

/** The names of the header fields a handler saw (those with a value), sorted. */
function names(headers: Headers): string[] {
  return Object.keys(headers)
    .filter((name) => headers[name] !== undefined)
    .sort();
}

describe.each(['express', 'fastify'] as const)('%s: background refresh', (framework) => {
  it('inside a stale window no request waits for the refresh: every STALE reply is complete before the background handler run ends', async () => {
    const cache = createCache();
    const order: string[] = [];
    let runs = 0;
    let releaseRefresh!: () => void;
    const refreshMayEnd = new Promise<void>((resolve) => {
      releaseRefresh = resolve;
    });
    const app = await serve(framework, { cache, ttl: 300, staleWhileRevalidate: '30s' }, async () => {
      const run = ++runs;
      // The refresh ends only once every request of the burst has its reply, or after a bound
      // (then the order below proves that some request waited for it).
      if (run === 2) await Promise.race([refreshMayEnd, sleep(5000)]);
      if (run === 2) order.push('refresh ended');
      return { body: `run ${run}` };
    });
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      await sleep(400);
      const ended = refreshEnded(cache);
      const replies = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const reply = await fetchReply(app.port, '/r');
          order.push('reply');
          return reply;
        }),
      );
      releaseRefresh();
      expect(await ended).toBe('stored');
      expect(replies.map((r) => r.headers['x-cache'])).toEqual(Array(8).fill('STALE'));
      expect(replies.map((r) => r.text)).toEqual(Array(8).fill('run 1'));
      expect(order).toEqual([...Array(8).fill('reply'), 'refresh ended']);
      expect(runs).toBe(2);
      const after = await fetchReply(app.port, '/r');
      expect(after.headers['x-cache']).toBe('HIT');
      expect(after.text).toBe('run 2');
    } finally {
      releaseRefresh();
      await app.close();
    }
  });

  it('a background refresh carries host, the Vary fields, the replayHeaders and nothing else of the live request (no cookie, authorization or forwarding field)', async () => {
    const cache = createCache();
    const seen: Headers[] = [];
    const app = await serve(
      framework,
      { cache, ttl: 300, staleWhileRevalidate: '30s', key: (req: { headers: Headers }) => `tenant:${String(req.headers['x-tenant'])}`, replayHeaders: ['X-Tenant'] } as HttpCacheOptions<never>,
      (headers) => {
        seen.push({ ...headers });
        return { headers: { vary: 'Accept-Language', 'cache-control': 'public' }, body: `for ${String(headers['x-tenant'])}` };
      },
    );
    const live = {
      'x-tenant': 't1',
      'accept-language': 'fr',
      cookie: 'session=secret',
      authorization: 'Bearer secret',
      'x-forwarded-for': '203.0.113.9',
      'x-request-id': 'abc',
    };
    try {
      // The first response of a URL that varies is stored with its record; the one after it
      // (past its lifetime) is stored under the URL's record, inside the stale window.
      expect((await fetchReply(app.port, '/r', { headers: live })).headers['x-cache']).toBe('MISS');
      await sleep(400);
      expect((await fetchReply(app.port, '/r', { headers: live })).headers['x-cache']).toBe('MISS');
      await sleep(400);
      const ended = refreshEnded(cache);
      const stale = await fetchReply(app.port, '/r', { headers: live });
      expect(stale.headers['x-cache']).toBe('STALE');
      expect(await ended).toBe('stored');
      expect(seen).toHaveLength(3);
      const replayed = seen[2]!;
      // Besides the validators of the stored response (Express gives every response an ETag).
      expect(names(replayed).filter((name) => name !== 'if-none-match')).toEqual(['accept-language', 'host', 'x-tenant']);
      expect(replayed['if-none-match']).toBe(stale.headers.etag);
      expect(replayed['accept-language']).toBe('fr');
      expect(replayed['x-tenant']).toBe('t1');
      expect(replayed.host).toBe(seen[0]!.host);
      expect((await fetchReply(app.port, '/r', { headers: live })).headers['x-cache']).toBe('HIT');
    } finally {
      await app.close();
    }
  });

  it('a conditional background refresh answered 304 renews the stored response without a new body', async () => {
    const cache = createCache();
    let full = 0;
    const conditional: (string | undefined)[] = [];
    const app = await serve(framework, { cache, ttl: 300, staleWhileRevalidate: '30s' }, (headers) => {
      const match = headers['if-none-match'] as string | undefined;
      if (match !== undefined) {
        conditional.push(match);
        if (match === '"v1"') return { status: 304, headers: { etag: '"v1"' } };
      }
      full++;
      return { headers: { etag: '"v1"' }, body: `body ${full}` };
    });
    try {
      await fetchReply(app.port, '/r');
      await sleep(400);
      const ended = refreshEnded(cache);
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('STALE');
      expect(await ended).toBe('stored');
      expect(conditional).toEqual(['"v1"']);
      const after = await fetchReply(app.port, '/r');
      expect(after.headers['x-cache']).toBe('HIT');
      expect(after.text).toBe('body 1');
      expect(Number(after.headers.age)).toBe(0);
      expect(full).toBe(1);
      // The renewed response keeps the route's stale window: past its lifetime it is served
      // stale again while the next refresh runs, not a miss.
      await sleep(400);
      const again = refreshEnded(cache);
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('STALE');
      expect(await again).toBe('stored');
      expect(conditional).toEqual(['"v1"', '"v1"']);
    } finally {
      await app.close();
    }
  });

  it('a failing background refresh keeps the stale response served and holds retries (staleIfError, failSafeRetry)', async () => {
    const cache = createCache();
    let runs = 0;
    let refreshes = 0;
    cache.on('refresh', (info) => {
      if (info.phase === 'start') refreshes++;
    });
    const app = await serve(framework, { cache, ttl: 300, staleWhileRevalidate: '30s', staleIfError: '30s', failSafeRetry: '30s' }, () => {
      runs++;
      if (runs > 1) throw new Error('origin down');
      return { body: 'good' };
    });
    try {
      await fetchReply(app.port, '/r');
      await sleep(400);
      const ended = refreshEnded(cache);
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('STALE');
      expect(await ended).toBe('error');
      const later = await Promise.all(Array.from({ length: 5 }, () => fetchReply(app.port, '/r')));
      expect(later.map((r) => [r.status, r.headers['x-cache'], r.text])).toEqual(Array(5).fill([200, 'STALE', 'good']));
      expect(runs).toBe(2);
      expect(refreshes).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('a route whose check refuses the reconstructed request stores nothing: the next request runs its own handler', async () => {
    const cache = createCache();
    let runs = 0;
    const app = await serve(
      framework,
      { cache, ttl: 300, staleWhileRevalidate: '30s' },
      () => ({ body: `run ${++runs}` }),
      (headers) => headers['x-api-key'] === 'k',
    );
    try {
      expect((await fetchReply(app.port, '/r', { headers: { 'x-api-key': 'k' } })).text).toBe('run 1');
      await sleep(400);
      const ended = refreshEnded(cache);
      expect((await fetchReply(app.port, '/r', { headers: { 'x-api-key': 'k' } })).headers['x-cache']).toBe('STALE');
      await ended;
      expect(runs).toBe(1);
      const next = await fetchReply(app.port, '/r', { headers: { 'x-api-key': 'k' } });
      expect(next.headers['x-cache']).toBe('MISS');
      expect(next.text).toBe('run 2');
    } finally {
      await app.close();
    }
  });

  it("refresh: 'foreground' lets the request that wins the refresh run its own handler (X-Cache: MISS)", async () => {
    const cache = createCache();
    let runs = 0;
    const app = await serve(framework, { cache, ttl: 300, staleWhileRevalidate: '30s', refresh: 'foreground' }, () => ({ body: `run ${++runs}` }));
    try {
      await fetchReply(app.port, '/r');
      await sleep(400);
      const reply = await fetchReply(app.port, '/r');
      expect(reply.headers['x-cache']).toBe('MISS');
      expect(reply.text).toBe('run 2');
    } finally {
      await app.close();
    }
  });
});

describe.each(['express', 'fastify'] as const)('%s: the expiry edge', (framework) => {
  it('a response whose lifetime ends a moment before its Redis entry does is answered at once (STALE), never by a run its client waits for', async () => {
    const cache = createCache({ redis: redis.url, prefix: `edge-${framework}:` });
    let runs = 0;
    const app = await serve(framework, { cache, ttl: 200, staleWhileRevalidate: '30s' }, async () => {
      const run = ++runs;
      await sleep(40);
      return { body: `run ${run}` };
    });
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      // The first fill has landed once a request finds it (until then one may wait for its store).
      await waitUntil('a HIT', async () => (await fetchReply(app.port, '/r')).headers['x-cache'] === 'HIT', 2000, 1);
      // One request after another, back to back, across several expiries (each ~240 ms apart):
      // the ones that land between the response's end of freshness and its entry's find it.
      const seen: string[] = [];
      const started = monotonicNow();
      while (monotonicNow() - started < 1500) seen.push(String((await fetchReply(app.port, '/r')).headers['x-cache']));
      expect(runs).toBeGreaterThanOrEqual(3);
      expect(seen.filter((x) => x !== 'HIT' && x !== 'STALE')).toEqual([]);
    } finally {
      await app.close();
      await cache.close();
    }
  });
});

describe.each(['express', 'fastify'] as const)('%s: hits from process memory', (framework) => {
  it('with earlyRefresh, hits near the end of the lifetime refresh the response in the background: every reply is a HIT, none waits for an expiry', async () => {
    const cache = createCache();
    let runs = 0;
    // A large beta makes the early refresh of each hit near the end of the 600 ms lifetime nearly certain.
    const app = await serve(framework, { cache, ttl: 600, earlyRefresh: { beta: 1000 } }, async () => {
      const run = ++runs;
      await sleep(5);
      return { body: `run ${run}` };
    });
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      const seen: string[] = [];
      const started = monotonicNow();
      while (monotonicNow() - started < 1500) {
        seen.push(String((await fetchReply(app.port, '/r')).headers['x-cache']));
        await sleep(20);
      }
      expect(runs).toBeGreaterThanOrEqual(3);
      expect(seen.filter((x) => x !== 'HIT')).toEqual([]);
    } finally {
      await app.close();
      await cache.close();
    }
  });

  it('a hit from process memory is answered and counted as one from resolve (X-Cache: HIT, Age, Cache-Status; the hit event)', async () => {
    const cache = createCache();
    const layers: string[] = [];
    cache.on('hit', (info: { layer?: string }) => layers.push(String(info.layer)));
    let runs = 0;
    const app = await serve(framework, { cache, ttl: '1m' }, () => ({ headers: { etag: '"v1"' }, body: `run ${++runs}` }));
    try {
      expect((await fetchReply(app.port, '/r')).headers['x-cache']).toBe('MISS');
      await waitUntil('a HIT', async () => (await fetchReply(app.port, '/r')).headers['x-cache'] === 'HIT', 2000, 1);
      const hit = await fetchReply(app.port, '/r');
      expect(hit.text).toBe('run 1');
      expect(hit.headers.age).toBe('0');
      expect(hit.headers['cache-status']).toMatch(/^dogpile-guard; hit; ttl=(59|60)$/);
      const notModified = await fetchReply(app.port, '/r', { headers: { 'if-none-match': '"v1"' } });
      expect(notModified.status).toBe(304);
      expect(notModified.headers['x-cache']).toBe('HIT');
      expect(runs).toBe(1);
      expect(layers.length).toBeGreaterThanOrEqual(3);
      expect(new Set(layers)).toEqual(new Set([layers[0]]));
    } finally {
      await app.close();
      await cache.close();
    }
  });
});

describe('refresh options', () => {
  it('bad refresh and replayHeaders values throw InvalidOptionError naming the option', async () => {
    const optionOf = (fn: () => unknown): string | undefined => {
      try {
        fn();
      } catch (error) {
        if (error instanceof InvalidOptionError) return error.option;
        throw error;
      }
      return undefined;
    };
    expect(optionOf(() => dogpileGuard({ refresh: 'later' as never }))).toBe('refresh');
    expect(optionOf(() => dogpileGuard({ replayHeaders: 'x-tenant' as never }))).toBe('replayHeaders');
    expect(optionOf(() => dogpileGuard({ replayHeaders: ['bad header'] }))).toBe('replayHeaders');
    const app = Fastify();
    await expect(app.register(dogpileGuardPlugin, { refresh: 'sometimes' as never }).ready()).rejects.toMatchObject({ option: 'refresh' });
    await app.close();
  });
});
