import type { AddressInfo } from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { adapterSuite } from './fixtures/http-suite.js';
import { fetchReply, freshId } from './fixtures/http-client.js';

adapterSuite('express');

describe('dogpileGuard (Express specifics)', () => {
  const servers: import('node:http').Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });
  async function listen(app: express.Express): Promise<number> {
    const server = app.listen(0, '127.0.0.1');
    servers.push(server);
    await new Promise((r) => server.once('listening', r));
    return (server.address() as AddressInfo).port;
  }

  it('captures writeHead headers and res.write / res.end chunks', async () => {
    const app = express();
    let runs = 0;
    app.use(dogpileGuard({ cache: createCache(), statuses: [201] }));
    app.get('/w', (_req, res) => {
      runs++;
      res.writeHead(201, { 'content-type': 'text/plain; charset=utf-8', 'x-custom': ['a', 'b'] });
      res.write('héllo ');
      res.write(Buffer.from('wörld'));
      res.end(' ✓', 'utf8');
    });
    const port = await listen(app);
    const first = await fetchReply(port, '/w');
    const second = await fetchReply(port, '/w');
    expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
    for (const r of [first, second]) {
      expect(r.status).toBe(201);
      expect(r.text).toBe('héllo wörld ✓');
      expect(r.headers['x-custom']).toBe('a, b');
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
    }
    expect(Number(second.headers['content-length'])).toBe(Buffer.byteLength('héllo wörld ✓'));
    expect(runs).toBe(1);
  });

  /**
   * A stand-in for `compression()`: gzips the whole body in end() for clients that accept it,
   * unless the response already has a Content-Encoding (as the real one does).
   */
  function miniCompression(): express.RequestHandler {
    return (req, res, next) => {
      if (!String(req.headers['accept-encoding'] ?? '').includes('gzip')) return next();
      const chunks: Buffer[] = [];
      const toBuffer = (c: unknown, enc?: unknown) => (Buffer.isBuffer(c) ? c : Buffer.from(String(c), (typeof enc === 'string' ? enc : 'utf8') as BufferEncoding));
      const end = res.end.bind(res) as (chunk?: unknown) => express.Response;
      res.write = ((chunk: unknown, enc?: unknown) => {
        chunks.push(toBuffer(chunk, enc));
        return true;
      }) as typeof res.write;
      res.end = ((chunk?: unknown, enc?: unknown) => {
        if (chunk != null && typeof chunk !== 'function') chunks.push(toBuffer(chunk, enc));
        if (res.getHeader('content-encoding') !== undefined) return end(Buffer.concat(chunks));
        const body = gzipSync(Buffer.concat(chunks));
        res.setHeader('content-encoding', 'gzip');
        res.setHeader('vary', 'Accept-Encoding');
        res.setHeader('content-length', body.length);
        return end(body);
      }) as typeof res.end;
      next();
    };
  }

  it.each([
    ['compression before dogpileGuard (stores the plain body)', true],
    ['compression after dogpileGuard (stores the gzipped body)', false],
  ])('works with response compression: %s', async (_label, compressionFirst) => {
    const app = express();
    let runs = 0;
    if (compressionFirst) app.use(miniCompression());
    app.use(dogpileGuard({ cache: createCache() }));
    if (!compressionFirst) app.use(miniCompression());
    app.get('/z', (_req, res) => {
      runs++;
      res.type('text/plain').send('squeeze me '.repeat(50));
    });
    const port = await listen(app);
    const plain = 'squeeze me '.repeat(50);
    const gz = { 'accept-encoding': 'gzip' };
    const replies = [
      await fetchReply(port, '/z', { headers: gz }),
      await fetchReply(port, '/z', { headers: gz }),
      await fetchReply(port, '/z'),
      await fetchReply(port, '/z'),
    ];
    expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'HIT', 'MISS', 'HIT']);
    for (const r of replies.slice(0, 2)) {
      expect(r.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(r.body).toString()).toBe(plain);
    }
    for (const r of replies.slice(2)) {
      expect(r.headers['content-encoding']).toBeUndefined();
      expect(r.text).toBe(plain);
    }
    expect(runs).toBe(2);
  });

  it('answers a matching If-None-Match with 304 from the cache', async () => {
    const app = express();
    app.use(dogpileGuard({ cache: createCache() }));
    app.get('/e', (_req, res) => {
      res.send('etagged body');
    });
    const port = await listen(app);
    const first = await fetchReply(port, '/e');
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^W\//);
    const conditional = await fetchReply(port, '/e', { headers: { 'if-none-match': etag } });
    expect(conditional.status).toBe(304);
    expect(conditional.xCache).toBe('HIT');
    expect(conditional.headers.etag).toBe(etag);
    expect(conditional.body.length).toBe(0);
    const other = await fetchReply(port, '/e', { headers: { 'if-none-match': 'W/"nope"' } });
    expect(other.status).toBe(200);
    expect(other.text).toBe('etagged body');
  });

  it("a leader's conditional request still produces the full response for the others", async () => {
    const app = express();
    app.use(dogpileGuard({ cache: createCache() }));
    app.get('/e', (_req, res) => {
      res.send('etagged body');
    });
    const port = await listen(app);
    // Same body => same weak ETag as Express computes it.
    const probe = express();
    probe.get('/e', (_req, res) => {
      res.send('etagged body');
    });
    const probePort = await listen(probe);
    const etag = String((await fetchReply(probePort, '/e')).headers.etag);
    const leader = await fetchReply(port, '/e', { headers: { 'if-none-match': etag } });
    expect(leader.status).toBe(200);
    expect(leader.xCache).toBe('MISS');
    const next = await fetchReply(port, '/e');
    expect(next.xCache).toBe('HIT');
    expect(next.text).toBe('etagged body');
  });

  /** An API-key check, as a route or app middleware. */
  const requireKey: express.RequestHandler = (req, res, next) => {
    if (req.headers['x-api-key'] === 'k1') next();
    else res.status(401).send('no key');
  };

  it('never serves a request refused by the middleware before it on the route, cached or in flight', async () => {
    const app = express();
    let runs = 0;
    app.get('/x', requireKey, dogpileGuard({ cache: createCache() }), async (_req, res) => {
      runs++;
      await new Promise((r) => setTimeout(r, 100));
      res.send(`secret ${runs}`);
    });
    const port = await listen(app);
    const withKey = { headers: { 'x-api-key': 'k1' } };
    // While the leader's handler runs, and once its response is cached.
    const [leader, refusedDuringFlight] = await Promise.all([fetchReply(port, '/x', withKey), fetchReply(port, '/x')]);
    const hit = await fetchReply(port, '/x', withKey);
    const refused = await fetchReply(port, '/x');
    expect([leader.xCache, hit.xCache, hit.text]).toEqual(['MISS', 'HIT', 'secret 1']);
    for (const r of [refusedDuringFlight, refused]) expect([r.status, r.text, r.xCache]).toEqual([401, 'no key', undefined]);
    expect(runs).toBe(1);
  });

  it('app-wide, acts before route-level middleware: only middleware added before it protects cached responses', async () => {
    const app = express();
    app.use('/public', dogpileGuard({ cache: createCache() }));
    app.get('/public/x', requireKey, (_req, res) => {
      res.send('meant for key holders');
    });
    app.use('/private', requireKey, dogpileGuard({ cache: createCache() }));
    app.get('/private/x', (_req, res) => {
      res.send('key holders only');
    });
    const port = await listen(app);
    const withKey = { headers: { 'x-api-key': 'k1' } };
    for (const path of ['/public/x', '/private/x']) await fetchReply(port, path, withKey);
    // The route-level check runs after the app-wide guard, which serves the hit first.
    const leaked = await fetchReply(port, '/public/x');
    expect([leaked.status, leaked.xCache, leaked.text]).toEqual([200, 'HIT', 'meant for key holders']);
    const refused = await fetchReply(port, '/private/x');
    expect([refused.status, refused.text, refused.xCache]).toEqual([401, 'no key', undefined]);
  });

  it('acts once per request when used app-wide and on the route', async () => {
    const app = express();
    let runs = 0;
    const cache = createCache();
    app.use(dogpileGuard({ cache }));
    app.get('/twice', dogpileGuard({ cache, ttl: '5m' }), (_req, res) => {
      runs++;
      res.send(`twice ${runs}`);
    });
    const port = await listen(app);
    const a = await fetchReply(port, '/twice');
    const b = await fetchReply(port, '/twice');
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
    expect(b.text).toBe('twice 1');
  });

  it('caches under a mount path with the full URL', async () => {
    const app = express();
    const router = express.Router();
    let runs = 0;
    router.use(dogpileGuard({ cache: createCache() }));
    router.get('/item', (req, res) => {
      runs++;
      res.send(`item ${req.baseUrl}`);
    });
    app.use('/a', router);
    app.use('/b', router);
    const port = await listen(app);
    const id = freshId();
    const a = await fetchReply(port, `/a/item?id=${id}`);
    const b = await fetchReply(port, `/b/item?id=${id}`);
    expect([a.text, b.text]).toEqual(['item /a', 'item /b']);
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'MISS']);
    expect(runs).toBe(2);
  });

  it('passes errors from key() and skip() to the error handler', async () => {
    const app = express();
    app.use(
      dogpileGuard({
        cache: createCache(),
        key: (req) => {
          if (req.query.bad === 'throw') throw new Error('key failed');
          return (req.query.bad === 'number' ? 42 : req.originalUrl) as string;
        },
      }),
    );
    app.get('/k', (_req, res) => {
      res.send('ok');
    });
    const errors: string[] = [];
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(err.message);
      res.status(500).send('handled');
    });
    const port = await listen(app);
    expect((await fetchReply(port, '/k?bad=throw')).text).toBe('handled');
    expect((await fetchReply(port, '/k?bad=number')).text).toBe('handled');
    expect((await fetchReply(port, '/k')).text).toBe('ok');
    expect(errors[0]).toBe('key failed');
    expect(errors[1]).toMatch(/^Invalid key: must return a string/);
  });

  it('rejects bad options at once, naming the option', () => {
    expect(() => dogpileGuard({ ttl: -1 })).toThrow(InvalidOptionError);
    expect(() => dogpileGuard({ ttl: 'soon' as never })).toThrow(/Invalid ttl/);
    expect(() => dogpileGuard({ statuses: [] })).toThrow(/Invalid statuses/);
    expect(() => dogpileGuard({ statuses: [200, 1000] })).toThrow(/Invalid statuses/);
    expect(() => dogpileGuard({ maxBodySize: -5 })).toThrow(/Invalid maxBodySize/);
    expect(() => dogpileGuard({ key: 'url' as never })).toThrow(/Invalid key/);
    expect(() => dogpileGuard({ skip: 'yes' as never })).toThrow(/Invalid skip/);
    expect(() => dogpileGuard({ cache: {} as never })).toThrow(/Invalid cache/);
    expect(() => dogpileGuard({ tll: 5 } as never)).toThrow(/Invalid tll: unknown option/);
  });
});
