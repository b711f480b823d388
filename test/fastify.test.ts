import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import defaultExport, { dogpileGuardPlugin } from '../src/fastify/index.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { adapterSuite } from './fixtures/http-suite.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, request } from '../tools/http-client.js';

adapterSuite('fastify');

describe('dogpileGuardPlugin (Fastify specifics)', () => {
  const apps: FastifyInstance[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });
  async function make(options: Parameters<typeof dogpileGuardPlugin>[1] = { cache: createCache() }): Promise<FastifyInstance> {
    const app = Fastify();
    apps.push(app);
    await app.register(dogpileGuardPlugin, options);
    return app;
  }
  async function listen(app: FastifyInstance): Promise<number> {
    await app.listen({ port: 0, host: '127.0.0.1' });
    return (app.server.address() as AddressInfo).port;
  }

  it('is the default export too', () => {
    expect(defaultExport).toBe(dogpileGuardPlugin);
  });

  it('leaves a route with config.dogpile = false uncached', async () => {
    const app = await make();
    let runs = 0;
    app.get('/off', { config: { dogpile: false } }, async () => `off ${++runs}`);
    const port = await listen(app);
    const a = await fetchReply(port, '/off');
    const b = await fetchReply(port, '/off');
    expect([a.text, b.text]).toEqual(['off 1', 'off 2']);
    expect([a.xCache, b.xCache]).toEqual([undefined, undefined]);
  });

  it('rejects a bad per-route config when the route is declared', async () => {
    const app = await make();
    expect(() => app.get('/bad', { config: { dogpile: { ttl: -1 } } }, async () => 'x')).toThrow(InvalidOptionError);
    expect(() => app.get('/bad2', { config: { dogpile: { ttl: 'soon' as never } } }, async () => 'x')).toThrow(/config\.dogpile\.ttl \(route GET \/bad2\)/);
    expect(() => app.get('/bad3', { config: { dogpile: 'yes' as never } }, async () => 'x')).toThrow(/Invalid config\.dogpile/);
  });

  it('shares a streamed body when its client left before the handler ran (during a slow preHandler)', async () => {
    const app = await make();
    let runs = 0;
    app.get('/late', { preHandler: (_req, _reply, done) => void setTimeout(done, 150) }, async (_req, reply) => {
      runs++;
      const bytes = randomBytes(60_000);
      const body = Readable.from(
        (async function* () {
          for (let i = 0; i < 6; i++) {
            await sleep(30);
            yield bytes.subarray(i * 10_000, (i + 1) * 10_000);
          }
        })(),
      );
      return reply.type('application/octet-stream').send(body);
    });
    const port = await listen(app);
    const leader = request(port, '/late', { abortAfter: 50 });
    await sleep(70);
    const waiters = await Promise.all(Array.from({ length: 3 }, () => fetchReply(port, '/late')));
    expect(await leader).toBeUndefined();
    expect(runs).toBe(1);
    for (const r of waiters) {
      expect(r.xCache).toBe('COALESCED');
      expect(r.body.length).toBe(60_000);
      expect(r.body.equals(waiters[0]!.body)).toBe(true);
    }
    expect((await fetchReply(port, '/late')).xCache).toBe('HIT');
    expect(runs).toBe(1);
  });

  it('a stream payload that breaks after its client left costs one more run, not one per waiter', async () => {
    const app = await make({ cache: createCache(), hitForMissTtl: 5000 });
    let runs = 0;
    app.get('/breaks', async (request, reply) => {
      runs++;
      const bytes = randomBytes(60_000);
      const body = Readable.from(
        (async function* () {
          for (let i = 0; i < 6; i++) {
            await sleep(40);
            if (request.raw.socket.destroyed) throw new Error('upstream aborted');
            yield bytes.subarray(i * 10_000, (i + 1) * 10_000);
          }
        })(),
      );
      return reply.type('application/octet-stream').send(body);
    });
    const port = await listen(app);
    const leader = request(port, '/breaks', { abortOnData: true });
    while (runs === 0) await sleep(2);
    const waiters = await Promise.all(Array.from({ length: 4 }, () => fetchReply(port, '/breaks')));
    expect(await leader).toBeUndefined();
    expect(runs).toBe(2);
    for (const r of waiters) {
      expect(r.body.length).toBe(60_000);
      expect(r.body.equals(waiters[0]!.body)).toBe(true);
    }
    expect(waiters.map((r) => r.xCache).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'MISS']);
    expect((await fetchReply(port, '/breaks')).xCache).toBe('HIT');
    expect(runs).toBe(2);
  });

  it('rejects bad plugin options at registration, naming the option', async () => {
    const app = Fastify();
    apps.push(app);
    await expect(app.register(dogpileGuardPlugin, { ttl: -1 }).ready()).rejects.toThrow(/Invalid ttl/);
    const app2 = Fastify();
    apps.push(app2);
    await expect(app2.register(dogpileGuardPlugin, { statuses: 'all' as never }).ready()).rejects.toThrow(/Invalid statuses/);
  });

  it('lets a route with its own HEAD handler answer HEAD, storing nothing', async () => {
    const app = await make();
    let headRuns = 0;
    let getRuns = 0;
    app.head('/h', async (_request, reply) => {
      headRuns++;
      return reply.header('content-length', '11').send();
    });
    app.get('/h', async () => {
      getRuns++;
      return 'hello world';
    });
    const port = await listen(app);
    const heads = await Promise.all([1, 2, 3].map(() => fetchReply(port, '/h', { method: 'HEAD' })));
    expect(heads.map((r) => r.xCache)).toEqual(['MISS', 'MISS', 'MISS']);
    expect(headRuns).toBe(3);
    const get = await fetchReply(port, '/h');
    expect([get.xCache, get.text]).toEqual(['MISS', 'hello world']);
    const headHit = await fetchReply(port, '/h', { method: 'HEAD' });
    expect(headHit.xCache).toBe('HIT');
    expect([headRuns, getRuns]).toEqual([3, 1]);
  });

  it('runs onRequest hooks (auth) before serving from the cache', async () => {
    const app = await make();
    app.addHook('onRequest', (request, reply, done) => {
      if (request.headers['x-allowed'] === 'yes') done();
      else reply.code(403).send('forbidden');
    });
    let runs = 0;
    app.get('/guarded', async () => `secret ${++runs}`);
    const port = await listen(app);
    const allowed = await fetchReply(port, '/guarded', { headers: { 'x-allowed': 'yes' } });
    const again = await fetchReply(port, '/guarded', { headers: { 'x-allowed': 'yes' } });
    const denied = await fetchReply(port, '/guarded');
    expect([allowed.xCache, again.xCache]).toEqual(['MISS', 'HIT']);
    expect(denied.status).toBe(403);
    expect(denied.text).toBe('forbidden');
  });

  it('serves a hit only past an app-level preHandler check: a refused request never gets the cached response', async () => {
    const app = await make();
    app.addHook('preHandler', async (request, reply) => {
      if (request.headers['x-api-key'] !== 'k1') return reply.code(401).send('no key');
    });
    let runs = 0;
    app.get('/keyed', async () => `secret ${++runs}`);
    const port = await listen(app);
    const filled = await fetchReply(port, '/keyed', { headers: { 'x-api-key': 'k1' } });
    const hit = await fetchReply(port, '/keyed', { headers: { 'x-api-key': 'k1' } });
    expect([filled.xCache, hit.xCache, hit.text]).toEqual(['MISS', 'HIT', 'secret 1']);
    const refused = await fetchReply(port, '/keyed');
    expect([refused.status, refused.text, refused.xCache]).toEqual([401, 'no key', undefined]);
    expect(runs).toBe(1);
  });

  it('serves a hit only past a route-level preValidation hook', async () => {
    const app = await make();
    let runs = 0;
    app.get(
      '/validated',
      {
        preValidation: (request, reply, done) => {
          if (request.headers['x-tenant'] === 'acme') done();
          else reply.code(403).send('wrong tenant');
        },
      },
      async () => `tenant data ${++runs}`,
    );
    const port = await listen(app);
    const filled = await fetchReply(port, '/validated', { headers: { 'x-tenant': 'acme' } });
    const hit = await fetchReply(port, '/validated', { headers: { 'x-tenant': 'acme' } });
    expect([filled.xCache, hit.xCache, hit.text]).toEqual(['MISS', 'HIT', 'tenant data 1']);
    const refused = await fetchReply(port, '/validated', { headers: { 'x-tenant': 'other' } });
    expect([refused.status, refused.text, refused.xCache]).toEqual([403, 'wrong tenant', undefined]);
  });

  it('serves a hit only to a request that passes the route schema (a required header)', async () => {
    const app = await make();
    let runs = 0;
    app.get(
      '/schema',
      { schema: { headers: { type: 'object', required: ['x-client'], properties: { 'x-client': { type: 'string', minLength: 1 } } } } },
      async () => `schema ${++runs}`,
    );
    const port = await listen(app);
    const filled = await fetchReply(port, '/schema', { headers: { 'x-client': 'web' } });
    const hit = await fetchReply(port, '/schema', { headers: { 'x-client': 'web' } });
    expect([filled.xCache, hit.xCache, hit.text]).toEqual(['MISS', 'HIT', 'schema 1']);
    const refused = await fetchReply(port, '/schema');
    expect(refused.status).toBe(400);
    expect(refused.xCache).toBeUndefined();
    expect(refused.text).toMatch(/x-client/);
  });

  it('keeps every handler style working behind the wrapper: returned values, reply.send now or later, throws', async () => {
    const app = await make();
    app.decorate('greeting', 'hello');
    app.setErrorHandler((error, _request, reply) => {
      void reply.code(500).send(`handled: ${(error as Error).message}`);
    });
    const runs: Record<string, number> = {};
    const run = (name: string) => (runs[name] = (runs[name] ?? 0) + 1);
    app.get('/sync-value', function (this: FastifyInstance & { greeting?: string }) {
      return `${this.greeting} ${run('sync-value')}`;
    });
    app.get('/sync-send', (_request, reply) => {
      void reply.type('text/plain').send(`sent ${run('sync-send')}`);
    });
    app.get('/callback', (_request, reply) => {
      setTimeout(() => void reply.type('text/plain').send(`later ${run('callback')}`), 20);
    });
    app.get('/return-reply', async (_request, reply) => {
      setTimeout(() => void reply.type('text/plain').send(`reply ${run('return-reply')}`), 20);
      return reply;
    });
    app.get(
      '/slow-onsend',
      {
        onSend: async (_request, _reply, payload) => {
          run('slow-onsend hook');
          await new Promise((r) => setTimeout(r, 10));
          return payload;
        },
      },
      async () => `slow onSend ${run('slow-onsend')}`,
    );
    app.get('/sync-throw', () => {
      run('sync-throw');
      throw new Error('sync');
    });
    app.get('/async-throw', async () => {
      run('async-throw');
      throw new Error('async');
    });
    const port = await listen(app);
    for (const [path, text] of [
      ['/sync-value', 'hello 1'],
      ['/sync-send', 'sent 1'],
      ['/callback', 'later 1'],
      ['/return-reply', 'reply 1'],
      ['/slow-onsend', 'slow onSend 1'],
    ] as const) {
      const [a, b, c] = await Promise.all([fetchReply(port, path), fetchReply(port, path), fetchReply(port, path)]);
      const hit = await fetchReply(port, path);
      expect([a.text, b.text, c.text, hit.text], path).toEqual([text, text, text, text]);
      expect(hit.xCache, path).toBe('HIT');
    }
    for (const name of ['sync-throw', 'async-throw']) {
      const a = await fetchReply(port, `/${name}`);
      const b = await fetchReply(port, `/${name}`);
      expect([a.status, a.text, b.status, a.xCache], name).toEqual([500, `handled: ${name.split('-')[0]}`, 500, 'MISS']);
    }
    expect(runs).toEqual({ 'sync-value': 1, 'sync-send': 1, callback: 1, 'return-reply': 1, 'slow-onsend': 1, 'slow-onsend hook': 4, 'sync-throw': 2, 'async-throw': 2 });
  });

  it("passes a bad key() result to Fastify's error handler", async () => {
    const app = await make({ cache: createCache(), key: () => 42 as never });
    app.setErrorHandler((error, _request, reply) => {
      void reply.code(500).send(`${(error as Error).name}: ${(error as Error).message}`);
    });
    let runs = 0;
    app.get('/bad-key', async () => `ran ${++runs}`);
    const port = await listen(app);
    const r = await fetchReply(port, '/bad-key');
    expect(r.status).toBe(500);
    expect(r.text).toMatch(/InvalidOptionError: .*key/);
    expect(runs).toBe(0);
  });

  it('sees the final headers: a Set-Cookie added by a later onSend hook keeps the response out', async () => {
    const app = await make();
    app.addHook('onSend', async (request, reply, payload) => {
      if (request.url.startsWith('/session')) reply.header('set-cookie', `sid=${freshId()}`);
      return payload;
    });
    let runs = 0;
    app.get('/session', async () => `page ${++runs}`);
    const port = await listen(app);
    const a = await fetchReply(port, '/session');
    const b = await fetchReply(port, '/session');
    expect([a.text, b.text]).toEqual(['page 1', 'page 2']);
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'MISS']);
    expect(a.headers['set-cookie']).not.toEqual(b.headers['set-cookie']);
  });

  it("keeps the route's own hooks and runs them first", async () => {
    const app = await make();
    const seen: string[] = [];
    app.get(
      '/hooked',
      {
        onRequest: [
          (_req, _reply, done) => {
            seen.push('route onRequest');
            done();
          },
        ],
        onSend: (_req, reply, payload, done) => {
          reply.header('x-route', '1');
          done(null, payload);
        },
      },
      async () => 'hooked',
    );
    const port = await listen(app);
    const a = await fetchReply(port, '/hooked');
    const b = await fetchReply(port, '/hooked');
    expect(seen).toEqual(['route onRequest', 'route onRequest']);
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
    expect(b.headers['x-route']).toBe('1');
  });

  it('covers routes in child plugins, with their prefix in the key', async () => {
    const app = await make();
    let runs = 0;
    await app.register(
      async (child) => {
        child.get('/item', async () => `item ${++runs}`);
      },
      { prefix: '/v1' },
    );
    const port = await listen(app);
    const a = await fetchReply(port, '/v1/item');
    const b = await fetchReply(port, '/v1/item');
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
    expect(b.text).toBe('item 1');
  });

  it('leaves alone routes declared before the plugin was registered', async () => {
    const app = Fastify();
    apps.push(app);
    let runs = 0;
    app.get('/early', async () => `early ${++runs}`);
    await app.register(dogpileGuardPlugin, { cache: createCache() });
    const port = await listen(app);
    const a = await fetchReply(port, '/early');
    const b = await fetchReply(port, '/early');
    expect([a.xCache, b.xCache]).toEqual([undefined, undefined]);
    expect(b.text).toBe('early 2');
  });
});
