/**
 * HTTP responses and invalidation, Express and Fastify, on a real Redis:
 * - a response stored outside the miss protocol (a `Vary` variant, a 304 renewing a stored
 *   response) whose handler ran while one of its tags was invalidated is older than the
 *   invalidation;
 * - `Dogpile-Tags` given outside `res.set` / `reply.header` in the handler (`res.writeHead`, a
 *   route-level `onSend`, an app hook added after the plugin) tags the entry and never reaches
 *   the client;
 * - a write behind a proxy drops every stored variant of its URL, whatever forwarding headers
 *   the write and the reads carried.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';

type Framework = 'express' | 'fastify';

const server = useRedis();

const FROM_CACHE = /^(HIT|COALESCED)$/;

/** Holds a handler at its start until the test lets it go on. */
class Gates {
  private readonly armed = new Map<string, { arrived: () => void; release: Promise<void> }>();

  /** The next run of the handler for `id` waits: `started` resolves when it is held, `release()` lets it go on. */
  arm(id: string): { started: Promise<void>; release: () => void } {
    let arrived!: () => void;
    let release!: () => void;
    const started = new Promise<void>((r) => (arrived = r));
    this.armed.set(id, { arrived, release: new Promise<void>((r) => (release = r)) });
    return { started, release };
  }

  async pass(id: string): Promise<void> {
    const gate = this.armed.get(id);
    if (gate === undefined) return;
    this.armed.delete(id);
    gate.arrived();
    await gate.release;
  }
}

interface App {
  runs: (id: string) => number;
  gates: Gates;
  get(path: string, headers?: Record<string, string>, method?: string): Promise<Reply>;
  close(): Promise<void>;
}

/**
 * The response of a run of a `/cond/:id` handler: a 304 to its revalidation (fresh for a
 * minute), else a full response with a validator, stale at once (or with `?fresh`, fresh for a minute).
 */
function conditional(ifNoneMatch: string | undefined, fresh: unknown): { status: number; headers: Record<string, string>; body?: string } {
  if (ifNoneMatch === '"e1"') return { status: 304, headers: { 'Cache-Control': 'max-age=60', ETag: '"e1"' } };
  return { status: 200, headers: { 'Cache-Control': fresh === undefined ? 'max-age=0' : 'max-age=60', ETag: '"e1"' }, body: 'full' };
}

/**
 * Routes (`:id` names the test's resource; the `tags` option tags each entry `t:<id>`):
 * - `GET /vary/:id`: `Vary: Accept-Language`, fresh for a minute;
 * - `GET /cond/:id`: see `conditional`;
 * - `GET|POST /wh/:id`: `Dogpile-Tags: dt:<id>` given outside the usual setter (Express:
 *   `res.writeHead(200, {...})`; Fastify: a route-level `onSend`);
 * - `GET /late/:id` (Fastify): `Dogpile-Tags: dt:<id>` set by an app hook added after the plugin;
 * - `GET /off/:id` (Fastify, `config.dogpile: false`): `Dogpile-Tags` set by a route-level `onSend`;
 * - `GET|POST /p/:id`: a plain response fresh for a minute (the POST writes).
 */
async function startApp(framework: Framework, cache: DogpileCache, extra: { staleWhileRevalidate?: number } = {}): Promise<App> {
  const counts = new Map<string, number>();
  const run = (id: string) => {
    const n = (counts.get(id) ?? 0) + 1;
    counts.set(id, n);
    return n;
  };
  const gates = new Gates();
  const tags = (path: string) => [`t:${path.split('/')[2]!.split('?')[0]!}`];
  const fresh = { 'Content-Type': 'text/plain', 'Cache-Control': 'max-age=60' };
  if (framework === 'express') {
    const app = express();
    app.use(dogpileGuard({ cache, tags: (req) => tags(req.path), ...extra }));
    app.get('/vary/:id', async (req, res) => {
      const id = req.params.id!;
      await gates.pass(id);
      res.set({ ...fresh, Vary: 'Accept-Language' }).send(`vary ${id} run ${run(id)}`);
    });
    app.get('/cond/:id', async (req, res) => {
      const id = req.params.id!;
      await gates.pass(id);
      run(id);
      const r = conditional(req.headers['if-none-match'], req.query.fresh);
      res.status(r.status).set(r.headers);
      if (r.body === undefined) res.end();
      else res.send(r.body);
    });
    app.all('/wh/:id', (req, res) => {
      const id = req.params.id!;
      res.writeHead(200, { ...fresh, 'Dogpile-Tags': `dt:${id}` });
      res.end(`wh ${id} run ${run(id)}`);
    });
    app.all('/p/:id', (req, res) => {
      const id = req.params.id!;
      res.set(fresh).send(`p ${id} run ${run(id)}`);
    });
    const listening = app.listen(0, '127.0.0.1');
    await new Promise((r) => listening.once('listening', r));
    const port = (listening.address() as AddressInfo).port;
    return {
      runs: (id) => counts.get(id) ?? 0,
      gates,
      get: (p, headers, method) => fetchReply(port, p, { headers, method }),
      close: async () => {
        listening.closeAllConnections();
        await new Promise((r) => listening.close(r));
      },
    };
  }
  const app: FastifyInstance = Fastify();
  await app.register(dogpileGuardPlugin, { cache, tags: (request) => tags(request.url), ...extra });
  // An app hook added after the plugin.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.url.startsWith('/late/')) void reply.header('Dogpile-Tags', `dt:${request.url.split('/')[2]!}`);
    done(null, payload);
  });
  const routeTags = (request: { url: string }, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void) => {
    void reply.header('Dogpile-Tags', `dt:${request.url.split('/')[2]!}`);
    done(null, payload);
  };
  app.get<{ Params: { id: string } }>('/vary/:id', async (request, reply) => {
    const id = request.params.id;
    await gates.pass(id);
    void reply.headers({ ...fresh, Vary: 'Accept-Language' });
    return `vary ${id} run ${run(id)}`;
  });
  app.get<{ Params: { id: string } }>('/cond/:id', async (request, reply) => {
    const id = request.params.id;
    await gates.pass(id);
    run(id);
    const r = conditional(request.headers['if-none-match'], (request.query as Record<string, unknown>).fresh);
    void reply.code(r.status).headers(r.headers);
    return r.body ?? '';
  });
  app.route<{ Params: { id: string } }>({
    method: ['GET', 'POST'],
    url: '/wh/:id',
    onSend: routeTags,
    handler: async (request, reply) => {
      void reply.headers(fresh);
      return `wh ${request.params.id} run ${run(request.params.id)}`;
    },
  });
  app.get<{ Params: { id: string } }>('/late/:id', async (request, reply) => {
    void reply.headers(fresh);
    return `late ${request.params.id} run ${run(request.params.id)}`;
  });
  app.get<{ Params: { id: string } }>('/off/:id', { config: { dogpile: false }, onSend: routeTags }, async (request) => `off ${request.params.id}`);
  app.route<{ Params: { id: string } }>({
    method: ['GET', 'POST'],
    url: '/p/:id',
    handler: async (request, reply) => {
      void reply.headers(fresh);
      return `p ${request.params.id} run ${run(request.params.id)}`;
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { runs: (id) => counts.get(id) ?? 0, gates, get: (p, headers, method) => fetchReply(port, p, { headers, method }), close: () => app.close() };
}

/**
 * Runs `request` with its handler held at its start while `invalidateTags([tag])` runs and
 * resolves; the handler then goes on and answers.
 */
async function invalidatedMeanwhile(app: App, cache: DogpileCache, id: string, tag: string, request: () => Promise<Reply>): Promise<Reply> {
  const gate = app.gates.arm(id);
  const reply = request();
  await gate.started;
  // A few ms apart on each side, so that neither the start nor the store shares a millisecond
  // with the invalidation (timestamps are whole milliseconds): what decides is where the
  // handler started. Nothing here waits for the cache.
  await sleep(5);
  await cache.invalidateTags([tag]);
  await sleep(5);
  gate.release();
  return reply;
}

/**
 * The first answer to `request` that did not come from the previous request's run while its
 * flight was still settling (the client can have that run's response before): one that joined
 * it (COALESCED), or the stale value a refresh in progress answers with (STALE).
 */
async function afterFlight(request: () => Promise<Reply>): Promise<Reply> {
  for (let i = 0; ; i++) {
    const reply = await request();
    if ((reply.xCache !== 'COALESCED' && reply.xCache !== 'STALE') || i === 20) return reply;
  }
}

describe.each(['express', 'fastify'] as const)('%s: HTTP hardening', (framework) => {
  let cache: DogpileCache;
  let app: App;
  beforeAll(async () => {
    cache = createCache({ redis: server.url, prefix: `hardening-${framework}` });
    app = await startApp(framework, cache);
  });
  afterAll(async () => {
    await app?.close();
    await cache?.close();
  });

  describe('a response whose handler ran while its tag was invalidated is older than the invalidation', () => {
    it('a Vary variant', async () => {
      const id = freshId();
      const en = { 'accept-language': 'en' };
      const first = await invalidatedMeanwhile(app, cache, id, `t:${id}`, () => app.get(`/vary/${id}`, en));
      expect(first.xCache).toBe('MISS');
      expect(first.headers.vary).toBe('Accept-Language');
      const next = await afterFlight(() => app.get(`/vary/${id}`, en));
      expect(next.xCache).toBe('MISS');
      expect(next.text).toBe(`vary ${id} run 2`);
      // Stored again, by a handler that ran after the invalidation: served from the cache.
      expect((await app.get(`/vary/${id}`, en)).xCache).toMatch(FROM_CACHE);
      expect(app.runs(id)).toBe(2);
    });

    it('a 304 renewing a stored response', async () => {
      const id = freshId();
      const stored = await app.get(`/cond/${id}`);
      expect([stored.xCache, stored.status, stored.text]).toEqual(['MISS', 200, 'full']);
      // Stale at once: the next request revalidates it, and the handler's 304 renews it for a minute.
      const renewed = await invalidatedMeanwhile(app, cache, id, `t:${id}`, () => app.get(`/cond/${id}`));
      expect([renewed.status, renewed.text]).toEqual([200, 'full']);
      expect(app.runs(id)).toBe(2);
      const next = await afterFlight(() => app.get(`/cond/${id}`));
      expect(next.xCache).toBe('MISS');
      expect(app.runs(id)).toBe(3);
    });

    it('a 304 to the refresh of a stale response', async () => {
      const swr = await startApp(framework, cache, { staleWhileRevalidate: 60_000 });
      try {
        const id = freshId();
        const url = `/cond/${id}?fresh=1`;
        // Fresh for a minute, with a validator; then made stale by its tag.
        const stored = await swr.get(url);
        expect([stored.xCache, stored.text]).toEqual(['MISS', 'full']);
        await cache.invalidateTags([`t:${id}`], { stale: true });
        // The request that takes the refresh runs the handler with the stored validator: a 304 renews the entry.
        const refreshed = await invalidatedMeanwhile(swr, cache, id, `t:${id}`, () => swr.get(url));
        expect([refreshed.status, refreshed.text]).toEqual([200, 'full']);
        expect(swr.runs(id)).toBe(2);
        const next = await afterFlight(() => swr.get(url));
        expect(next.xCache).toBe('MISS');
        expect(swr.runs(id)).toBe(3);
      } finally {
        await swr.close();
      }
    });
  });

  describe('Dogpile-Tags given outside the usual setter tags the entry and never reaches the client', () => {
    const where = framework === 'express' ? ['/wh'] : ['/wh', '/late'];
    it.each(where)('%s', async (route) => {
      const id = freshId();
      const url = `${route}/${id}`;
      const first = await app.get(url);
      const hit = await app.get(url);
      expect([first.xCache, first.status]).toEqual(['MISS', 200]);
      expect(hit.xCache).toMatch(FROM_CACHE);
      for (const r of [first, hit]) expect(r.headers['dogpile-tags']).toBeUndefined();
      await cache.invalidateTags([`dt:${id}`]);
      const again = await app.get(url);
      expect(again.xCache).toBe('MISS');
      expect(again.text).toMatch(/ run 2$/);
      expect(again.headers['dogpile-tags']).toBeUndefined();
    });

    it('on responses it does not store', async () => {
      const paths = framework === 'express' ? [`/wh/${freshId()}`] : [`/wh/${freshId()}`, `/off/${freshId()}`];
      for (const path of paths) {
        // The POST writes; `/off/` is not cached (and has no POST).
        const replies = [path.startsWith('/off/') ? await app.get(path) : await app.get(path, {}, 'POST'), await app.get(path, { authorization: 'Bearer t' })];
        for (const r of replies) {
          expect(r.status).toBe(200);
          expect(r.headers['dogpile-tags']).toBeUndefined();
        }
      }
    });
  });

  it('a write drops the responses stored for every forwarded host and proto of its URL, whatever the write carried', async () => {
    const id = freshId();
    const url = `/p/${id}?b=2&a=1`;
    const readers: Record<string, string>[] = [
      {},
      { 'x-forwarded-host': 'a.example' },
      { 'x-forwarded-host': 'b.example', 'x-forwarded-proto': 'https' },
      { forwarded: 'host=c.example;proto=https' },
    ];
    const writers: Record<string, string>[] = [{ 'x-forwarded-host': 'w.example', 'x-forwarded-proto': 'http' }, {}];
    let runs = 0;
    for (const writer of writers) {
      for (const headers of readers) {
        expect((await app.get(url, headers)).xCache).toBe('MISS');
        expect((await app.get(url, headers)).xCache).toMatch(FROM_CACHE);
      }
      const write = await app.get(`/p/${id}?a=1&b=2`, writer, 'POST');
      expect(write.status).toBe(200);
      runs += readers.length + 1;
      expect(app.runs(id)).toBe(runs);
    }
    for (const headers of readers) expect((await app.get(url, headers)).xCache).toBe('MISS');
  });
});

describe('express: a guard mounted on routes', () => {
  let cache: DogpileCache;
  let port: number;
  let close: () => Promise<void>;
  const counts = new Map<string, number>();
  beforeAll(async () => {
    cache = createCache({ redis: server.url, prefix: 'hardening-routes' });
    const app = express();
    const handler = (req: express.Request, res: express.Response) => {
      const n = (counts.get(req.path) ?? 0) + 1;
      counts.set(req.path, n);
      res.set('Cache-Control', 'max-age=60').send(`${req.method} ${req.path} run ${n}`);
    };
    // On the GET route alone: the write never reaches it.
    app.get('/alone/:id', dogpileGuard({ cache }), handler);
    app.post('/alone/:id', handler);
    // The same guard on the GET and the write routes.
    const shared = dogpileGuard({ cache });
    app.get('/shared/:id', shared, handler);
    app.post('/shared/:id', shared, handler);
    // Mounted by path: every method.
    app.use('/mounted', dogpileGuard({ cache }));
    app.get('/mounted/:id', handler);
    app.post('/mounted/:id', handler);
    const listening = app.listen(0, '127.0.0.1');
    await new Promise((r) => listening.once('listening', r));
    port = (listening.address() as AddressInfo).port;
    close = async () => {
      listening.closeAllConnections();
      await new Promise((r) => listening.close(r));
    };
  });
  afterAll(async () => {
    await close?.();
    await cache?.close();
  });

  it.each([
    ['/alone', false],
    ['/shared', true],
    ['/mounted', true],
  ] as const)('%s: a write invalidates the stored GET: %s', async (prefix, invalidates) => {
    const path = `${prefix}/${freshId()}`;
    expect((await fetchReply(port, path)).xCache).toBe('MISS');
    expect((await fetchReply(port, path)).xCache).toMatch(FROM_CACHE);
    expect((await fetchReply(port, path, { method: 'POST' })).status).toBe(200);
    const after = await fetchReply(port, path);
    expect(after.xCache).toBe(invalidates ? 'MISS' : 'HIT');
    expect(after.text).toBe(`GET ${path} run ${invalidates ? 3 : 1}`);
  });
});
