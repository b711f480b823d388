/**
 * HTTP caching semantics of the Express and Fastify adapters, end to end: real apps whose
 * handlers set their headers as apps do (`res.set`, `reply.header`), real requests.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { formatHttpDate } from '../src/http/rules/http-date.js';
import type { HttpCacheOptions } from '../src/http/options.js';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, type Reply } from '../tools/http-client.js';

type Framework = 'express' | 'fastify';

interface App {
  port: number;
  /** Handler runs per path (without query). */
  runs: (path: string) => number;
  close(): Promise<void>;
}

/**
 * Routes: `GET /r/:id` answers with the status in `?status=` and the response headers given as
 * JSON in `?h=`; `POST|PUT|PATCH|DELETE /r/:id` likewise (a write). The body tells the run.
 */
async function startApp(framework: Framework, guard: HttpCacheOptions<never>): Promise<App> {
  const counts = new Map<string, number>();
  const run = (path: string) => {
    const n = (counts.get(path) ?? 0) + 1;
    counts.set(path, n);
    return n;
  };
  // `?etag=run`: the ETag names the run (the representation changes with every run).
  const answer = (query: Record<string, unknown>, n: number) => {
    const headers = query.h === undefined ? {} : (JSON.parse(String(query.h)) as Record<string, string>);
    if (query.etag === 'run') headers.ETag = `"run${n}"`;
    return { status: query.status === undefined ? 200 : Number(query.status), headers };
  };
  if (framework === 'express') {
    const app = express();
    app.use(dogpileGuard(guard as HttpCacheOptions<express.Request>));
    const handler = async (req: express.Request, res: express.Response) => {
      const n = run(req.path);
      if (req.query.ms !== undefined) await sleep(Number(req.query.ms));
      const { status, headers } = answer(req.query, n);
      // `?notmod=x`: a conditional request gets a 304 naming another representation, "x".
      if (req.query.notmod !== undefined && req.headers['if-none-match'] !== undefined) {
        res.status(304).set('ETag', `"${String(req.query.notmod)}"`).end();
        return;
      }
      // `?same=1`: the same body every run (Express's own weak ETag then matches).
      res.status(status).set(headers).send(req.query.same === undefined ? `${req.method} ${req.path} run ${n}` : `${req.method} ${req.path}`);
    };
    app.get('/r/:id', handler);
    for (const m of ['post', 'put', 'patch', 'delete'] as const) app[m]('/r/:id', handler);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    return {
      port: (server.address() as AddressInfo).port,
      runs: (p) => counts.get(p) ?? 0,
      close: async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      },
    };
  }
  const app: FastifyInstance = Fastify();
  await app.register(dogpileGuardPlugin, guard as never);
  app.route({
    method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    url: '/r/:id',
    handler: async (request, reply) => {
      const path = request.url.split('?')[0]!;
      const n = run(path);
      const query = request.query as Record<string, unknown>;
      if (query.ms !== undefined) await sleep(Number(query.ms));
      const { status, headers } = answer(request.query as Record<string, unknown>, n);
      for (const [name, value] of Object.entries(headers)) reply.header(name, value);
      if (query.notmod !== undefined && request.headers['if-none-match'] !== undefined) {
        reply.code(304).header('ETag', `"${String(query.notmod)}"`);
        return '';
      }
      // As @fastify/etag does: a matching If-None-Match gets a 304.
      if (headers.ETag !== undefined && request.headers['if-none-match'] === headers.ETag) {
        reply.code(304);
        return '';
      }
      reply.code(status);
      return `${request.method} ${path} run ${n}`;
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as AddressInfo).port, runs: (p) => counts.get(p) ?? 0, close: () => app.close() };
}

const path = (id: string, headers: Record<string, string> = {}, status?: number) =>
  `/r/${id}?h=${encodeURIComponent(JSON.stringify(headers))}${status === undefined ? '' : `&status=${status}`}`;

/** The `ttl=` of a `Cache-Status` value. */
const ttlOf = (reply: Reply): number => Number(/ttl=(-?\d+)/.exec(String(reply.headers['cache-status']))?.[1]);

describe.each(['express', 'fastify'] as const)('%s: HTTP caching', (framework) => {
  const apps: App[] = [];
  const caches: DogpileCache[] = [];
  afterEach(async () => {
    for (const a of apps.splice(0)) await a.close();
    for (const c of caches.splice(0)) await c.close();
  });
  async function start(guard: HttpCacheOptions<never> = {}): Promise<App & { get(p: string, h?: Record<string, string>, method?: string): Promise<Reply> }> {
    const cache = createCache();
    caches.push(cache);
    const app = await startApp(framework, { cache, ...guard });
    apps.push(app);
    return { ...app, get: (p, headers, method) => fetchReply(app.port, p, { headers, method }) };
  }

  describe('freshness from the response (RFC 9111 §4.2)', () => {
    it('keeps a response for its s-maxage, else max-age, else Expires − Date, not the adapter ttl', async () => {
      const app = await start({ ttl: '1h' });
      const cases: [Record<string, string>, number][] = [
        [{ 'Cache-Control': 'max-age=30' }, 30],
        [{ 'Cache-Control': 'max-age=30, s-maxage=120' }, 120],
        [{ Date: formatHttpDate(Date.now()), Expires: formatHttpDate(Date.now() + 90_000) }, 90],
        [{}, 3600],
      ];
      for (const [headers, lifetime] of cases) {
        const id = freshId();
        const miss = await app.get(path(id, headers));
        const hit = await app.get(path(id, headers));
        expect([miss.xCache, hit.xCache]).toEqual(['MISS', 'HIT']);
        expect(hit.text).toBe(miss.text);
        expect(ttlOf(miss)).toBeLessThanOrEqual(lifetime);
        expect(ttlOf(miss)).toBeGreaterThan(lifetime - 5);
        expect(ttlOf(hit)).toBeLessThanOrEqual(lifetime);
        expect(ttlOf(hit)).toBeGreaterThan(lifetime - 5);
      }
    });

    it('does not reuse max-age=0, a negative or invalid max-age, a past or invalid Expires', async () => {
      const app = await start();
      for (const headers of <Record<string, string>[]>[
        { 'Cache-Control': 'max-age=0' },
        { 'Cache-Control': 'max-age=-5' },
        { 'Cache-Control': 'max-age=1, max-age=3600' },
        { Expires: formatHttpDate(Date.now() - 60_000) },
        { Expires: '0' },
      ]) {
        const id = freshId();
        const first = await app.get(path(id, headers));
        const second = await app.get(path(id, headers));
        expect([first.xCache, second.xCache]).toEqual(['MISS', 'MISS']);
        expect(second.text).toContain('run 2');
        // Express's res.send adds a weak ETag: such a response is kept, for revalidation only.
        expect(first.headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss(; stored; ttl=0)?$/);
      }
    });

    it('subtracts the Age the response arrived with, and adds its time in the cache to Age', async () => {
      const app = await start();
      const id = freshId();
      const headers = { 'Cache-Control': 'max-age=100', Age: '40' };
      const miss = await app.get(path(id, headers));
      expect(ttlOf(miss)).toBeLessThanOrEqual(60);
      expect(ttlOf(miss)).toBeGreaterThan(55);
      await sleep(1100);
      const hit = await app.get(path(id, headers));
      expect(hit.xCache).toBe('HIT');
      expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(41);
      expect(ttlOf(hit)).toBeLessThanOrEqual(59);
    });

    it('ttl: 0 stores only responses with explicit freshness; maxTtl caps every lifetime', async () => {
      const app = await start({ ttl: 0, maxTtl: '10s' });
      const plain = freshId();
      expect((await app.get(path(plain))).xCache).toBe('MISS');
      expect((await app.get(path(plain))).xCache).toBe('MISS');
      const explicit = freshId();
      const headers = { 'Cache-Control': 'max-age=3600' };
      const miss = await app.get(path(explicit, headers));
      const hit = await app.get(path(explicit, headers));
      expect(hit.xCache).toBe('HIT');
      expect(ttlOf(miss)).toBeLessThanOrEqual(10);
      expect(ttlOf(hit)).toBeLessThanOrEqual(10);
      // The browser still sees what the app said.
      expect(hit.headers['cache-control']).toBe('max-age=3600');
    });

    it('stores any final status with explicit freshness, `statuses` ones on the ttl, never a 206', async () => {
      const app = await start();
      const cases: [Record<string, string>, number, boolean][] = [
        [{ 'Cache-Control': 'max-age=60' }, 404, true],
        [{ 'Cache-Control': 'max-age=60' }, 410, true],
        [{}, 404, false],
        [{ 'Cache-Control': 'max-age=60' }, 500, true],
        [{}, 500, false],
        [{ 'Cache-Control': 'max-age=60', 'Content-Range': 'bytes 0-1/10' }, 206, false],
      ];
      for (const [headers, status, stored] of cases) {
        const id = freshId();
        const first = await app.get(path(id, headers, status));
        const second = await app.get(path(id, headers, status));
        expect(first.status).toBe(status);
        expect(second.status).toBe(status);
        expect([status, second.xCache]).toEqual([status, stored ? 'HIT' : 'MISS']);
      }
    });

    it('does not reuse no-cache, Pragma: no-cache, no-store or private responses without the handler', async () => {
      const app = await start();
      for (const headers of <Record<string, string>[]>[
        { 'Cache-Control': 'no-cache' },
        { Pragma: 'no-cache' },
        { 'Cache-Control': 'max-age=60, no-store' },
        { 'Cache-Control': 'max-age=60, private' },
      ]) {
        const id = freshId();
        await app.get(path(id, headers));
        expect((await app.get(path(id, headers))).xCache).toBe('MISS');
      }
    });
  });

  describe('targeted fields (RFC 9213)', () => {
    it('CDN-Cache-Control takes precedence over Cache-Control', async () => {
      const app = await start();
      const stored = freshId();
      const h1 = { 'Cache-Control': 'no-store', 'CDN-Cache-Control': 'max-age=120' };
      await app.get(path(stored, h1));
      const hit = await app.get(path(stored, h1));
      expect(hit.xCache).toBe('HIT');
      expect(ttlOf(hit)).toBeGreaterThan(100);
      expect(hit.headers['cache-control']).toBe('no-store');
      expect(hit.headers['cdn-cache-control']).toBe('max-age=120');
      const refused = freshId();
      const h2 = { 'Cache-Control': 'max-age=60', 'CDN-Cache-Control': 'no-store' };
      await app.get(path(refused, h2));
      expect((await app.get(path(refused, h2))).xCache).toBe('MISS');
    });

    it("Dogpile-Cache-Control rules every Vary variant, also those stored under the URL's recorded Vary", async () => {
      const app = await start();
      const url = path(freshId(), { 'Cache-Control': 'no-store', 'Dogpile-Cache-Control': 'max-age=300', Vary: 'Accept-Language' });
      for (const lang of ['de', 'en', 'fr']) {
        const miss = await app.get(url, { 'accept-language': lang });
        const hit = await app.get(url, { 'accept-language': lang });
        expect([lang, miss.xCache, hit.xCache]).toEqual([lang, 'MISS', 'HIT']);
        expect(miss.headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss; stored; ttl=(299|300)$/);
        expect(hit.headers['dogpile-cache-control']).toBeUndefined();
      }
    });

    it('Dogpile-Cache-Control rules over both and never leaves the server', async () => {
      const app = await start();
      const id = freshId();
      const headers = { 'Cache-Control': 'no-store', 'CDN-Cache-Control': 'no-store', 'Dogpile-Cache-Control': 'max-age=300' };
      const miss = await app.get(path(id, headers));
      const hit = await app.get(path(id, headers));
      expect([miss.xCache, hit.xCache]).toEqual(['MISS', 'HIT']);
      expect(ttlOf(hit)).toBeGreaterThan(250);
      for (const r of [miss, hit]) {
        expect(r.headers['dogpile-cache-control']).toBeUndefined();
        expect(r.headers['cache-control']).toBe('no-store');
      }
      // Also taken off responses the cache did not handle.
      const post = await app.get(path(freshId(), { 'Dogpile-Cache-Control': 'max-age=5' }), {}, 'POST');
      expect(post.headers['dogpile-cache-control']).toBeUndefined();
      const bypass = await app.get(path(freshId(), { 'Dogpile-Cache-Control': 'max-age=5' }), { authorization: 'Bearer x' });
      expect(bypass.headers['dogpile-cache-control']).toBeUndefined();
      const refused = freshId();
      const h2 = { 'Cache-Control': 'max-age=60', 'Dogpile-Cache-Control': 'no-store' };
      const first = await app.get(path(refused, h2));
      expect(first.headers['dogpile-cache-control']).toBeUndefined();
      expect((await app.get(path(refused, h2))).xCache).toBe('MISS');
    });
  });

  describe('conditional requests (RFC 9111 §4.3.2, RFC 9110 §13)', () => {
    const lastModified = 'Tue, 03 Nov 2026 10:00:00 GMT';
    const validators = { ETag: '"v1"', 'Last-Modified': lastModified, 'Cache-Control': 'max-age=60', 'Content-Language': 'en' };

    it("answers the leader's own conditional request with a 304 while storing the full response", async () => {
      const app = await start();
      const url = path(freshId(), validators);
      const leader = await app.get(url, { 'if-none-match': 'W/"v1"' });
      expect([leader.status, leader.xCache, leader.body.length]).toEqual([304, 'MISS', 0]);
      expect(leader.headers.etag).toBe('"v1"');
      expect(leader.headers['content-language']).toBeUndefined();
      expect(leader.headers['content-type']).toBeUndefined();
      const hit = await app.get(url);
      expect([hit.status, hit.xCache]).toEqual([200, 'HIT']);
      expect(hit.text).toContain('run 1');
      expect(hit.headers['content-language']).toBe('en');
      expect(Number(hit.headers['content-length'])).toBe(hit.body.length);
    });

    it('answers If-None-Match and If-Modified-Since from the cache: 304 when they match, else the full response', async () => {
      const app = await start();
      const url = path(freshId(), validators);
      const full = await app.get(url);
      expect(full.status).toBe(200);
      const cases: [Record<string, string>, number][] = [
        [{ 'if-none-match': '"v0", W/"v1"' }, 304],
        [{ 'if-none-match': '*' }, 304],
        [{ 'if-none-match': '"v2"' }, 200],
        [{ 'if-modified-since': lastModified }, 304],
        [{ 'if-modified-since': 'Mon, 02 Nov 2026 10:00:00 GMT' }, 200],
        // If-None-Match wins over If-Modified-Since.
        [{ 'if-none-match': '"v2"', 'if-modified-since': lastModified }, 200],
      ];
      for (const [headers, status] of cases) {
        const reply = await app.get(url, headers);
        expect([headers, reply.status, reply.xCache]).toEqual([headers, status, 'HIT']);
        if (status === 304) {
          expect(reply.body.length).toBe(0);
          expect(reply.headers.etag).toBe('"v1"');
          expect(reply.headers['cache-control']).toBe('max-age=60');
          expect(reply.headers.date).toBe(full.headers.date);
          expect(reply.headers['content-language']).toBeUndefined();
          expect(reply.headers['cache-status']).toMatch(/^dogpile-guard; hit; ttl=\d+$/);
        } else {
          expect(reply.text).toBe(full.text);
        }
      }
      expect(app.runs(`/r/${url.split('/')[2]!.split('?')[0]}`)).toBe(1);
    });
  });

  describe('Range (RFC 9110 §14)', () => {
    it('serves one range of a stored full 200 as a 206; several ranges as the full 200; an unsatisfiable one as a 416', async () => {
      const app = await start();
      const id = freshId();
      const url = path(id, { ETag: '"r1"' });
      // A miss with Range goes to the handler with its Range, and nothing is stored.
      const cold = await app.get(url, { range: 'bytes=0-3' });
      expect(cold.xCache).toBe('MISS');
      const full = await app.get(url);
      expect([full.status, full.xCache]).toEqual([200, 'MISS']);
      const size = full.body.length;
      const part = await app.get(url, { range: 'bytes=4-9' });
      expect([part.status, part.xCache, part.text]).toEqual([206, 'HIT', full.text.slice(4, 10)]);
      expect(part.headers['content-range']).toBe(`bytes 4-9/${size}`);
      expect(part.headers['content-length']).toBe('6');
      const suffix = await app.get(url, { range: 'bytes=-3' });
      expect([suffix.status, suffix.text]).toEqual([206, full.text.slice(-3)]);
      const several = await app.get(url, { range: 'bytes=0-1, 4-5' });
      expect([several.status, several.text]).toEqual([200, full.text]);
      const beyond = await app.get(url, { range: `bytes=${size}-` });
      expect([beyond.status, beyond.headers['content-range'], beyond.body.length]).toEqual([416, `bytes */${size}`, 0]);
      // If-Range: the stored ETag (strong) lets the range apply, another one gets the full 200.
      expect((await app.get(url, { range: 'bytes=0-1', 'if-range': '"r1"' })).status).toBe(206);
      expect((await app.get(url, { range: 'bytes=0-1', 'if-range': '"r0"' })).status).toBe(200);
      expect(app.runs(`/r/${id}`)).toBe(2);
    });
  });

  describe('revalidation (RFC 9111 §4.3)', () => {
    it('revalidates a no-cache response with its ETag: a 304 from the handler renews the entry and the client gets the stored body', async () => {
      const app = await start();
      const id = freshId();
      const url = path(id, { 'Cache-Control': 'no-cache', ETag: '"n1"', 'X-Version': 'one' });
      const first = await app.get(url);
      expect([first.status, first.xCache]).toEqual([200, 'MISS']);
      expect(first.headers['cache-status']).toBe('dogpile-guard; fwd=miss; stored; ttl=0');
      for (let i = 0; i < 2; i++) {
        const again = await app.get(url);
        // The handler ran (conditionally) and said 304: the stored body, with its headers.
        expect([again.status, again.xCache, again.text]).toEqual([200, 'MISS', first.text]);
        expect(again.headers['cache-status']).toBe('dogpile-guard; fwd=stale; fwd-status=304; stored');
        expect(again.headers.etag).toBe('"n1"');
        expect(again.headers['x-version']).toBe('one');
        expect(Number(again.headers['content-length'])).toBe(first.body.length);
      }
      expect(app.runs(`/r/${id}`)).toBe(3);
      // A client's own conditional request is still answered from the renewed entry.
      const conditional = await app.get(url, { 'if-none-match': '"n1"' });
      expect(conditional.status).toBe(304);
    });

    it('revalidates max-age=0 with a validator likewise; without a validator it is not stored at all', async () => {
      const app = await start();
      const withTag = path(freshId(), { 'Cache-Control': 'max-age=0', ETag: '"m1"' });
      const first = await app.get(withTag);
      const second = await app.get(withTag);
      expect([second.status, second.text, second.headers['cache-status']]).toEqual([200, first.text, 'dogpile-guard; fwd=stale; fwd-status=304; stored']);
      const bare = path(freshId(), { 'Cache-Control': 'max-age=0' });
      await app.get(bare);
      // Express's res.send adds a weak ETag of its own: a validator, so the response is kept for
      // revalidation, and the handler's new body (a new ETag) replaces it.
      expect((await app.get(bare)).headers['cache-status']).toBe(framework === 'express' ? 'dogpile-guard; fwd=stale; stored; ttl=0' : 'dogpile-guard; fwd=miss');
    });
  });

  describe('revalidation once a lifetime runs out (RFC 9111 §4.3.1, §4.3.4)', () => {
    it('keeps a response with a validator past its lifetime; the next request runs the handler conditionally and its 304 renews the entry without a new body', async () => {
      const app = await start();
      // An ETag the handler sets; on Express also the weak one res.send adds by itself. Both
      // handlers answer a matching If-None-Match with a 304 (res.send does it on its own).
      const cases: Record<string, string>[] = [{ 'Cache-Control': 'max-age=1', ETag: '"e1"', 'X-Version': 'one' }];
      if (framework === 'express') cases.push({ 'Cache-Control': 'max-age=1', 'X-Version': 'one' });
      for (const headers of cases) {
        const id = freshId();
        const url = `${path(id, headers)}&same=1`;
        const first = await app.get(url);
        expect(first.headers['cache-status']).toBe('dogpile-guard; fwd=miss; stored; ttl=1');
        expect((await app.get(url)).xCache).toBe('HIT');
        await sleep(1100);
        const revalidated = await app.get(url);
        // The handler ran with If-None-Match and said 304: the client gets the stored body.
        expect([revalidated.status, revalidated.xCache, revalidated.text]).toEqual([200, 'MISS', first.text]);
        expect(revalidated.headers['cache-status']).toBe('dogpile-guard; fwd=stale; fwd-status=304; stored');
        expect(revalidated.headers.etag).toBe(first.headers.etag);
        expect(revalidated.headers['x-version']).toBe('one');
        expect(Number(revalidated.headers['content-length'])).toBe(first.body.length);
        // Renewed: fresh again, with the 304's Date, and still the first body.
        const hit = await app.get(url);
        expect([hit.xCache, hit.text]).toEqual(['HIT', first.text]);
        expect(hit.headers.date).toBe(revalidated.headers.date);
        expect(app.runs(`/r/${id}`)).toBe(2);
      }
    });

    it('inside a stale window the refresh of a response with a validator is conditional too: a 304 renews the entry without a new body', async () => {
      // The request that wins the refresh runs it (the background refresh is in http-refresh.test.ts).
      const app = await start({ staleWhileRevalidate: '30s', refresh: 'foreground' });
      const id = freshId();
      const url = `${path(id, { 'Cache-Control': 'max-age=1', ETag: '"e1"', 'X-Version': 'one' })}&same=1`;
      const first = await app.get(url);
      await sleep(1100);
      // The request that wins the refresh lead runs the handler with If-None-Match; its 304 renews the entry.
      const refreshed = await app.get(url);
      expect([refreshed.status, refreshed.text]).toEqual([200, first.text]);
      expect(refreshed.headers['cache-status']).toBe('dogpile-guard; fwd=stale; fwd-status=304; stored');
      expect(refreshed.headers.etag).toBe('"e1"');
      const hit = await app.get(url);
      expect([hit.xCache, hit.text]).toEqual(['HIT', first.text]);
      expect(app.runs(`/r/${id}`)).toBe(2);
    });

    it('a new body from the conditional run replaces the entry; a response without a validator is gone with its lifetime', async () => {
      const app = await start();
      // The validator changes with every run (the handler's ETag names the run): a full 200.
      const id = freshId();
      const changing = `${path(id, { 'Cache-Control': 'max-age=1', ETag: '"e1"' })}&etag=run`;
      const first = await app.get(changing);
      await sleep(1100);
      const replaced = await app.get(changing);
      expect(replaced.xCache).toBe('MISS');
      expect(replaced.text).not.toBe(first.text);
      expect(replaced.headers['cache-status']).toMatch(/^dogpile-guard; fwd=stale; stored; ttl=\d+$/);
      expect((await app.get(changing)).text).toBe(replaced.text);
      if (framework === 'fastify') {
        // No validator (Fastify adds no ETag): nothing to revalidate with, not kept.
        const bare = path(freshId(), { 'Cache-Control': 'max-age=1' });
        await app.get(bare);
        await sleep(1100);
        expect((await app.get(bare)).headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss; stored; ttl=1$/);
      }
    });
  });

  describe('invalidation on writes (RFC 9111 §4.4)', () => {
    it('a successful POST, PUT, PATCH or DELETE invalidates the stored GET of its URL; a failed one does not', async () => {
      const app = await start();
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const id = freshId();
        const url = `/r/${id}`;
        const first = await app.get(url);
        expect((await app.get(url)).xCache).toBe('HIT');
        const failed = await app.get(`${url}?status=500`, {}, method);
        expect(failed.status).toBe(500);
        // Another query string is another URL; the write to this one fails: both leave the entry.
        expect((await app.get(url)).xCache).toBe('HIT');
        const write = await app.get(url, {}, method);
        expect(write.status).toBe(200);
        const after = await app.get(url);
        expect([method, after.xCache]).toEqual([method, 'MISS']);
        expect(after.text).not.toBe(first.text);
      }
    });

    it('invalidates the Location and Content-Location of a write on the same host, not on another', async () => {
      const app = await start();
      const [target, moved, elsewhere] = [freshId(), freshId(), freshId()];
      for (const id of [target, moved, elsewhere]) {
        await app.get(`/r/${id}`);
        expect((await app.get(`/r/${id}`)).xCache).toBe('HIT');
      }
      const headers = { Location: `/r/${target}`, 'Content-Location': `http://127.0.0.1:${app.port}/r/${moved}` };
      const other = { Location: `http://other.example/r/${elsewhere}` };
      await app.get(path(freshId(), headers, 201), { host: `127.0.0.1:${app.port}` }, 'POST');
      await app.get(path(freshId(), other, 201), { host: `127.0.0.1:${app.port}` }, 'POST');
      expect((await app.get(`/r/${target}`)).xCache).toBe('MISS');
      expect((await app.get(`/r/${moved}`)).xCache).toBe('MISS');
      expect((await app.get(`/r/${elsewhere}`)).xCache).toBe('HIT');
    });

    it("with a key function, invalidates the key that function gives a GET of the write's URL (the same client's entry)", async () => {
      type Seen = { method: string; url: string; headers: Record<string, string | string[] | undefined> };
      const seen: string[] = [];
      const key = (req: Seen) => {
        seen.push(req.method);
        const tenant = req.headers['x-tenant'];
        return typeof tenant === 'string' ? `${req.method} ${req.url.split('?')[0]!} tenant=${tenant}` : undefined;
      };
      const app = await start({ key } as HttpCacheOptions<never>);
      const id = freshId();
      const url = `/r/${id}`;
      for (const tenant of ['a', 'b']) {
        await app.get(url, { 'x-tenant': tenant });
        expect((await app.get(url, { 'x-tenant': tenant })).xCache).toBe('HIT');
      }
      // A failed write invalidates nothing; a write the key function has no key for neither.
      await app.get(`${url}?status=500`, { 'x-tenant': 'a' }, 'PUT');
      await app.get(url, {}, 'PUT');
      expect((await app.get(url, { 'x-tenant': 'a' })).xCache).toBe('HIT');
      seen.length = 0;
      const write = await app.get(`${url}?note=1`, { 'x-tenant': 'a' }, 'PUT');
      expect(write.status).toBe(200);
      // The key function was asked about a GET of the write's URL, with the write's headers.
      expect(seen).toEqual(['GET']);
      expect((await app.get(url, { 'x-tenant': 'a' })).xCache).toBe('MISS');
      expect((await app.get(url, { 'x-tenant': 'b' })).xCache).toBe('HIT');
    });

    it('invalidates every Vary variant of the URL', async () => {
      const app = await start();
      const id = freshId();
      const url = path(id, { Vary: 'Accept-Language' });
      for (const lang of ['de', 'en']) {
        await app.get(url, { 'accept-language': lang });
        expect((await app.get(url, { 'accept-language': lang })).xCache).toBe('HIT');
      }
      await app.get(url, {}, 'DELETE');
      expect((await app.get(url, { 'accept-language': 'de' })).xCache).toBe('MISS');
      expect((await app.get(url, { 'accept-language': 'en' })).xCache).toBe('MISS');
      expect((await app.get(url, { 'accept-language': 'en' })).xCache).toBe('HIT');
    });
  });

  describe('headers of what is served', () => {
    it('says Cache-Status (RFC 9211) next to X-Cache: stored miss, hit, collapsed, bypass', async () => {
      const app = await start();
      const id = freshId();
      const headers = { 'Cache-Control': 'max-age=60' };
      const miss = await app.get(path(id, headers));
      expect(miss.headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss; stored; ttl=(59|60)$/);
      const hit = await app.get(path(id, headers));
      expect(hit.headers['cache-status']).toMatch(/^dogpile-guard; hit; ttl=(5\d|60)$/);
      const bypass = await app.get(path(id, headers), { authorization: 'Bearer x' });
      expect(bypass.headers['cache-status']).toBe('dogpile-guard; fwd=bypass; detail=authorization');
      expect(bypass.text).toContain('run 2');
      const slow = `${path(freshId(), headers)}&ms=150`;
      const replies = await Promise.all(Array.from({ length: 4 }, () => app.get(slow)));
      const statuses = replies.map((r) => String(r.headers['cache-status'])).sort();
      expect(statuses).toEqual([
        ...Array<string>(3).fill('dogpile-guard; fwd=miss; collapsed'),
        expect.stringMatching(/^dogpile-guard; fwd=miss; stored; ttl=\d+$/),
      ]);
    });

    it('says stored only for what is stored: not for a body over maxBodySize, nor for a 304 that does not renew the entry', async () => {
      const app = await start({ maxBodySize: 10 });
      const big = path(freshId());
      const first = await app.get(big);
      expect(first.body.length).toBeGreaterThan(10);
      expect(first.headers['cache-status']).toBe('dogpile-guard; fwd=miss');
      expect((await app.get(big)).xCache).toBe('MISS');

      const small = await start();
      const id = freshId();
      const url = `${path(id, { 'Cache-Control': 'no-cache', ETag: '"n1"' })}&notmod=other`;
      expect((await small.get(url)).headers['cache-status']).toBe('dogpile-guard; fwd=miss; stored; ttl=0');
      // The revalidation's 304 names another representation: nothing is renewed, the entry goes.
      const notRenewed = await small.get(url);
      expect(notRenewed.headers['cache-status']).toBe('dogpile-guard; fwd=stale; fwd-status=304');
      expect((await small.get(url)).headers['cache-status']).toBe('dogpile-guard; fwd=miss; stored; ttl=0');
      expect(small.runs(`/r/${id}`)).toBe(3);
    });

    it('names the cache as cacheStatusName says, and refuses a bad name', async () => {
      const app = await start({ cacheStatusName: 'edge.example' });
      const id = freshId();
      await app.get(path(id));
      expect((await app.get(path(id))).headers['cache-status']).toMatch(/^edge\.example; hit; ttl=\d+$/);
      await expect(startApp(framework, { cacheStatusName: '' })).rejects.toThrow(/Invalid cacheStatusName/);
      await expect(startApp(framework, { cacheStatusName: 'caché' })).rejects.toThrow(/Invalid cacheStatusName/);
    });

    it("serves the origin's Date, not the time of the hit", async () => {
      const app = await start();
      const id = freshId();
      const miss = await app.get(path(id));
      await sleep(1100);
      const hit = await app.get(path(id));
      expect(hit.xCache).toBe('HIT');
      expect(hit.headers.date).toBe(miss.headers.date);
      expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(1);
    });
  });
});

describe('express: an app-wide and a route guard on one request', () => {
  it('reads Dogpile-Cache-Control once, in the guard that handles the request', async () => {
    const cache = createCache();
    const app = express();
    let runs = 0;
    app.use(dogpileGuard({ cache }));
    app.get('/d', dogpileGuard({ cache }), (_req, res) => {
      runs++;
      res.set({ 'Cache-Control': 'no-store', 'Dogpile-Cache-Control': 'max-age=60' }).send(`run ${runs}`);
    });
    const server = app.listen(0, '127.0.0.1');
    try {
      await new Promise((r) => server.once('listening', r));
      const port = (server.address() as AddressInfo).port;
      const first = await fetchReply(port, '/d');
      const second = await fetchReply(port, '/d');
      expect([first.xCache, second.xCache, second.text]).toEqual(['MISS', 'HIT', 'run 1']);
      expect(second.headers['dogpile-cache-control']).toBeUndefined();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await cache.close();
    }
  });
});
