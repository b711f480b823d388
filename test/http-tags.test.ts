/**
 * Tags on HTTP responses (Express and Fastify): the adapters' `tags(req)` option and the
 * `Dogpile-Tags` response header, purged with `cache.invalidateTags`, on a real Redis.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import type { HttpCacheOptions } from '../src/http/options.js';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId } from '../tools/basics.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';

type Framework = 'express' | 'fastify';

const server = useRedis();

/**
 * From the cache: a hit, or (right after a miss) a request that joined the leader's run while
 * its store was still landing; either way no handler ran for it (the run counts say so too).
 */
const FROM_CACHE = /^(HIT|COALESCED)$/;

interface App {
  port: number;
  runs: (path: string) => number;
  get(path: string, headers?: Record<string, string>, method?: string): Promise<Reply>;
  close(): Promise<void>;
}

/** The request's `?bad=` asks the `tags` option for a bad list: '' (an empty tag) or 'many' (65 tags). */
function requestTags(path: string, query: Record<string, unknown>): string[] {
  if (query.bad === 'empty') return [''];
  if (query.bad === 'many') return Array.from({ length: 65 }, (_, i) => `t${i}`);
  return [`item:${path.split('/')[2]!}`];
}

/**
 * `GET /items/:id`: tagged `item:<id>` by the `tags` option, and by the handler with
 * `Dogpile-Tags: <?dt=>` when given; `?vary=1` adds `Vary: Accept-Language`.
 */
async function startApp(framework: Framework, cache: DogpileCache, extra: HttpCacheOptions<never> = {}): Promise<App> {
  const counts = new Map<string, number>();
  const run = (path: string) => {
    const n = (counts.get(path) ?? 0) + 1;
    counts.set(path, n);
    return n;
  };
  const respond = (path: string, query: Record<string, unknown>) => {
    const headers: Record<string, string> = { 'Cache-Control': 'max-age=60' };
    if (query.dt !== undefined) headers['Dogpile-Tags'] = String(query.dt);
    if (query.vary !== undefined) headers.Vary = 'Accept-Language';
    return { headers, body: `${path} run ${run(path)}` };
  };
  if (framework === 'express') {
    const app = express();
    app.use(dogpileGuard({ cache, tags: (req) => requestTags(req.path, req.query), ...(extra as HttpCacheOptions<express.Request>) }));
    app.all('/items/:id', (req, res) => {
      const { headers, body } = respond(req.path, req.query);
      res.set(headers).send(body);
    });
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(error.message);
    });
    const listening = app.listen(0, '127.0.0.1');
    await new Promise((r) => listening.once('listening', r));
    const port = (listening.address() as AddressInfo).port;
    return {
      port,
      runs: (p) => counts.get(p) ?? 0,
      get: (p, headers, method) => fetchReply(port, p, { headers, method }),
      close: async () => {
        listening.closeAllConnections();
        await new Promise((r) => listening.close(r));
      },
    };
  }
  const app: FastifyInstance = Fastify();
  await app.register(dogpileGuardPlugin, {
    cache,
    tags: (request) => requestTags(request.url.split('?')[0]!, request.query as Record<string, unknown>),
    ...(extra as object),
  });
  app.route({
    method: ['GET', 'POST'],
    url: '/items/:id',
    handler: async (request, reply) => {
      const { headers, body } = respond(request.url.split('?')[0]!, request.query as Record<string, unknown>);
      for (const [name, value] of Object.entries(headers)) reply.header(name, value);
      return body;
    },
  });
  app.setErrorHandler((error, _request, reply) => {
    void reply.code(500).send((error as Error).message);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { port, runs: (p) => counts.get(p) ?? 0, get: (p, headers, method) => fetchReply(port, p, { headers, method }), close: () => app.close() };
}

describe.each(['express', 'fastify'] as const)('%s: tags', (framework) => {
  let cache: DogpileCache;
  let app: App;
  beforeAll(async () => {
    cache = createCache({ redis: server.url, prefix: `tags-${framework}` });
    app = await startApp(framework, cache);
  });
  afterAll(async () => {
    await app?.close();
    await cache?.close();
  });

  it("purges a response by a tag of the tags option or of its Dogpile-Tags header; the header is never sent", async () => {
    const id = freshId();
    const shelf = `shelf:${freshId()}`;
    const url = `/items/${id}?dt=${encodeURIComponent(` ${shelf} , all-items,`)}`;
    const first = await app.get(url);
    const hit = await app.get(url);
    expect(first.xCache).toBe('MISS');
    expect(hit.xCache).toMatch(FROM_CACHE);
    for (const r of [first, hit]) expect(r.headers['dogpile-tags']).toBeUndefined();

    await cache.invalidateTags(['some-other-tag']);
    expect((await app.get(url)).xCache).toMatch(FROM_CACHE);

    // A tag of the tags option.
    await cache.invalidateTags([`item:${id}`]);
    const recomputed = await app.get(url);
    expect(recomputed.xCache).toBe('MISS');
    expect(recomputed.text).toBe(`/items/${id} run 2`);
    expect((await app.get(url)).xCache).toMatch(FROM_CACHE);

    // A tag of the handler's Dogpile-Tags (trimmed; the empty member dropped).
    await cache.invalidateTags([shelf]);
    expect((await app.get(url)).text).toBe(`/items/${id} run 3`);
    expect((await app.get(url)).xCache).toMatch(FROM_CACHE);
    expect(app.runs(`/items/${id}`)).toBe(3);
  });

  it('purges every Vary variant of a tagged URL', async () => {
    const id = freshId();
    const url = `/items/${id}?vary=1&dt=variants`;
    for (const lang of ['de', 'en']) {
      await app.get(url, { 'accept-language': lang });
      expect((await app.get(url, { 'accept-language': lang })).xCache).toMatch(FROM_CACHE);
    }
    await cache.invalidateTags([`item:${id}`]);
    for (const lang of ['de', 'en']) expect((await app.get(url, { 'accept-language': lang })).xCache).toBe('MISS');
    for (const lang of ['de', 'en']) expect((await app.get(url, { 'accept-language': lang })).xCache).toMatch(FROM_CACHE);
    // Variants stored after the record was written carry the header's tags too.
    await cache.invalidateTags(['variants']);
    expect((await app.get(url, { 'accept-language': 'de' })).xCache).toBe('MISS');
    expect(app.runs(`/items/${id}`)).toBe(5);
  });

  it('refuses bad tags from the tags option with InvalidOptionError; a bad Dogpile-Tags keeps the response out of the store', async () => {
    for (const bad of ['empty', 'many']) {
      const r = await app.get(`/items/${freshId()}?bad=${bad}`);
      expect(r.status).toBe(500);
      expect(r.text).toMatch(bad === 'empty' ? /^Invalid tags: tag 0 is empty/ : /^Invalid tags: 65 distinct tags given; an entry carries at most 64/);
    }
    const many = Array.from({ length: 64 }, (_, i) => `h${i}`).join(',');
    const url = `/items/${freshId()}?dt=${many}`;
    const [a, b] = [await app.get(url), await app.get(url)];
    // 64 tags of its own plus the tags option's: over the limit, so never stored, never sent.
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'MISS']);
    expect(a.headers['cache-status']).toBe('dogpile-guard; fwd=miss');
    expect(a.headers['dogpile-tags']).toBeUndefined();
    await expect(startApp(framework, cache, { tags: ['not', 'a function'] } as never)).rejects.toThrow(/^Invalid tags: expected a function/);
  });

  it('takes Dogpile-Tags off responses it does not store too', async () => {
    const r = await app.get(`/items/${freshId()}?dt=x`, {}, 'POST');
    expect(r.status).toBe(200);
    expect(r.headers['dogpile-tags']).toBeUndefined();
    const bypass = await app.get(`/items/${freshId()}?dt=x`, { authorization: 'Bearer t' });
    expect(bypass.headers['dogpile-tags']).toBeUndefined();
  });
});
