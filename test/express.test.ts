import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, pipeline } from 'node:stream';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import compression from 'compression';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { adapterSuite } from './fixtures/http-suite.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, request, type Reply } from '../tools/http-client.js';

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

  describe.each([
    ['before dogpileGuard', true],
    ['between dogpileGuard and the handler', false],
  ])('with the compression package %s', (_label, compressionFirst) => {
    const plain = 'squeeze me, I am long enough to be compressed. '.repeat(100);
    /** The body a client gets, decoded as its Content-Encoding says. */
    const decode = (r: Reply): string => {
      const encoding = r.headers['content-encoding'];
      if (encoding === undefined) return r.text;
      if (encoding === 'gzip') return gunzipSync(r.body).toString();
      if (encoding === 'br') return brotliDecompressSync(r.body).toString();
      throw new Error(`unexpected content-encoding ${encoding}`);
    };

    it.each([
      ['res.send', false],
      ['res.writeHead + res.end', true],
    ])('every later client gets a body it can decode (%s)', async (_how, useWriteHead) => {
      const app = express();
      let runs = 0;
      if (compressionFirst) app.use(compression());
      app.use(dogpileGuard({ cache: createCache() }));
      if (!compressionFirst) app.use(compression());
      app.get('/z', (_req, res) => {
        runs++;
        if (useWriteHead) {
          res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
          res.end(plain);
        } else {
          res.type('text/plain').send(plain);
        }
      });
      const port = await listen(app);
      const clients: Record<string, string>[] = [{ 'accept-encoding': 'gzip' }, { 'accept-encoding': 'br' }, { 'accept-encoding': 'identity' }, {}];
      const replies: Reply[] = [];
      for (let round = 0; round < 3; round++) {
        for (const headers of clients) replies.push(await fetchReply(port, '/z', { headers }));
      }
      replies.forEach((r, i) => {
        const accepted = clients[i % clients.length]!['accept-encoding'];
        expect(r.status).toBe(200);
        expect(decode(r)).toBe(plain);
        // Each client gets the encoding it asked for, never one it did not.
        expect(r.headers['content-encoding']).toBe(accepted === 'gzip' || accepted === 'br' ? accepted : undefined);
      });
      // The last round comes from the cache.
      expect(replies.slice(-clients.length).map((r) => r.xCache)).toEqual(clients.map(() => 'HIT'));
      // Before the guard, one plain copy serves every encoding. After it, one copy per
      // Accept-Encoding (the first response is stored as its variant, the URL's key says Vary).
      expect(runs).toBe(compressionFirst ? 1 : clients.length);
    });

    it('a HEAD that leads stores a body every later client can decode', async () => {
      const app = express();
      let runs = 0;
      if (compressionFirst) app.use(compression());
      app.use(dogpileGuard({ cache: createCache() }));
      if (!compressionFirst) app.use(compression());
      app.get('/z', (_req, res) => {
        runs++;
        res.type('text/plain').send(plain);
      });
      const port = await listen(app);
      const head = await fetchReply(port, '/z', { method: 'HEAD', headers: { 'accept-encoding': 'gzip' } });
      expect([head.status, head.xCache, head.body.length]).toEqual([200, 'MISS', 0]);
      for (const accepted of ['gzip', 'br', 'identity']) {
        const r = await fetchReply(port, '/z', { headers: { 'accept-encoding': accepted } });
        expect(decode(r)).toBe(plain);
        expect(r.headers['content-encoding']).toBe(accepted === 'identity' ? undefined : accepted);
      }
      expect(runs).toBe(compressionFirst ? 1 : 3);
    });
  });

  it('serves an encoded response only to requests with the same Accept-Encoding, even without its Vary', async () => {
    const app = express();
    let runs = 0;
    app.use(dogpileGuard({ cache: createCache() }));
    app.get('/pre', (req, res) => {
      runs++;
      const gzip = String(req.headers['accept-encoding'] ?? '').includes('gzip');
      res.set('content-type', 'text/plain');
      if (gzip) res.set('content-encoding', 'gzip').send(gzipSync('pre-compressed'));
      else res.send('pre-compressed');
    });
    const port = await listen(app);
    const gz = await fetchReply(port, '/pre', { headers: { 'accept-encoding': 'gzip' } });
    const gzHit = await fetchReply(port, '/pre', { headers: { 'accept-encoding': 'gzip' } });
    const plainReply = await fetchReply(port, '/pre', { headers: { 'accept-encoding': 'identity' } });
    expect([gz.xCache, gzHit.xCache, plainReply.xCache]).toEqual(['MISS', 'HIT', 'MISS']);
    expect(gunzipSync(gzHit.body).toString()).toBe('pre-compressed');
    expect(gzHit.headers.vary).toBe('Accept-Encoding');
    expect(plainReply.headers['content-encoding']).toBeUndefined();
    expect(plainReply.text).toBe('pre-compressed');
    expect(runs).toBe(2);
  });

  it('runs a HEAD that leads as a GET, and shows HEAD again to what looks at req.method afterwards', async () => {
    const app = express();
    const seen: string[] = [];
    app.use((req, res, next) => {
      res.on('finish', () => seen.push(`finish ${req.method}`));
      next();
    });
    app.use(dogpileGuard({ cache: createCache() }));
    app.get('/m', (req, res) => {
      seen.push(`handler ${req.method}`);
      res.send('full body');
    });
    const port = await listen(app);
    const head = await fetchReply(port, '/m', { method: 'HEAD' });
    expect(head.xCache).toBe('MISS');
    expect(Number(head.headers['content-length'])).toBe('full body'.length);
    const get = await fetchReply(port, '/m');
    expect([get.xCache, get.text]).toEqual(['HIT', 'full body']);
    expect(seen).toEqual(['handler GET', 'finish HEAD', 'finish GET']);
  });

  it('lets a route with its own HEAD handler answer HEAD, storing nothing', async () => {
    const app = express();
    const cache = createCache();
    const guard = dogpileGuard({ cache });
    let headRuns = 0;
    let getRuns = 0;
    app.head('/h', guard, (_req, res) => {
      headRuns++;
      res.set('content-length', '11').end();
    });
    app.get('/h', guard, (_req, res) => {
      getRuns++;
      res.send('hello world');
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

  it("a leader's conditional request gets its 304 and still produces the full response for the others", async () => {
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
    expect(leader.status).toBe(304);
    expect(leader.body.length).toBe(0);
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

  it('plans a request once when used app-wide and on the route, whether the cache or the handler answers it', async () => {
    const app = express();
    let routeGuardAsked = 0;
    let runs = 0;
    app.use(dogpileGuard({ cache: createCache() }));
    const routeGuard = dogpileGuard({
      cache: createCache(),
      skip: () => {
        routeGuardAsked++;
        return false;
      },
    });
    app.get('/once', routeGuard, (_req, res) => {
      runs++;
      res.send(`once ${runs}`);
    });
    const port = await listen(app);
    const replies = [await fetchReply(port, '/once'), await fetchReply(port, '/once'), await fetchReply(port, '/once', { method: 'HEAD' })];
    expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'HIT', 'HIT']);
    // The route's guard never planned it: the app-wide one had it (claimed before next()).
    expect([routeGuardAsked, runs]).toEqual([0, 1]);
  });

  it('a hit after middleware that already sent the head ends the response, adding nothing', async () => {
    const app = express();
    const cache = createCache();
    let early = false;
    app.use((_req, res, next) => {
      if (early) res.flushHeaders();
      next();
    });
    app.use(dogpileGuard({ cache }));
    app.get('/early', (_req, res) => {
      res.send('stored body');
    });
    const port = await listen(app);
    const first = await fetchReply(port, '/early');
    expect([first.xCache, first.text]).toEqual(['MISS', 'stored body']);
    early = true;
    const after = await fetchReply(port, '/early');
    expect([after.status, after.xCache, after.text]).toEqual([200, undefined, '']);
  });

  describe('the header fields of a hit', () => {
    /** The raw header fields of a response, names lower-cased, in the order sent. */
    function rawFields(port: number, path: string, method = 'GET', headers: Record<string, string> = {}): Promise<{ status: number; fields: [string, string][]; body: Buffer }> {
      return new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const fields: [string, string][] = [];
            for (let i = 0; i < res.rawHeaders.length; i += 2) fields.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!]);
            resolve({ status: res.statusCode!, fields, body: Buffer.concat(chunks) });
          });
          res.on('error', reject);
        });
        req.setTimeout(5000, () => req.destroy(new Error('no response within 5 s')));
        req.on('error', reject);
        req.end();
      });
    }
    const names = (fields: [string, string][]) => fields.map(([name]) => name);
    const body = JSON.stringify({ catalogue: ['a', 'b', 'c'] });

    it.each([
      ['nothing set a header field before the guard (x-powered-by disabled)', false],
      ['middleware before the guard set header fields, one of them stored too', true],
    ])('are the stored ones once each, then X-Cache, Age and Cache-Status, when %s', async (_label, setBefore) => {
      const app = express();
      if (!setBefore) app.disable('x-powered-by');
      if (setBefore) {
        app.use((_req, res, next) => {
          res.setHeader('x-request-id', 'r-1');
          res.setHeader('x-route', 'set before the guard');
          next();
        });
      }
      app.use(dogpileGuard({ cache: createCache() }));
      app.get('/fields', (_req, res) => {
        res.set('x-route', 'yes').json(JSON.parse(body));
      });
      const port = await listen(app);
      const miss = await rawFields(port, '/fields');
      const hit = await rawFields(port, '/fields');
      const head = await rawFields(port, '/fields', 'HEAD');
      const etag = hit.fields.find(([name]) => name === 'etag')?.[1];
      expect(etag).toBeDefined();
      const notModified = await rawFields(port, '/fields', 'GET', { 'if-none-match': etag! });
      expect([miss.status, hit.status, head.status, notModified.status]).toEqual([200, 200, 200, 304]);
      expect(hit.body.toString()).toBe(body);
      expect([head.body.length, notModified.body.length]).toEqual([0, 0]);
      for (const reply of [hit, head, notModified]) {
        const sent = names(reply.fields);
        // No field twice; the cache's own three last, in this order.
        expect(new Set(sent).size).toBe(sent.length);
        const at = sent.indexOf('x-cache');
        expect(sent.slice(at, at + 3)).toEqual(['x-cache', 'age', 'cache-status']);
        // After them, only what Node adds itself.
        expect(sent.slice(at + 3).filter((n) => !['date', 'connection', 'keep-alive'].includes(n))).toEqual([]);
        expect(reply.fields.find(([name]) => name === 'x-cache')?.[1]).toBe('HIT');
        expect(sent.includes('x-powered-by')).toBe(setBefore);
        expect(sent.includes('x-request-id')).toBe(setBefore);
      }
      for (const reply of [hit, head]) {
        const field = (name: string) => reply.fields.find(([n]) => n === name)?.[1];
        // The stored X-Route replaces the one set before the guard.
        expect([field('content-type'), field('x-route'), field('content-length')]).toEqual(['application/json; charset=utf-8', 'yes', String(Buffer.byteLength(body))]);
      }
    });
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

  it('keeps reading a body piped after the client had already left (it hung up before the guard ran)', async () => {
    const app = express();
    let runs = 0;
    const slowCheck: express.RequestHandler = (_req, _res, next) => void setTimeout(next, 150);
    app.get('/late', slowCheck, dogpileGuard({ cache: createCache() }), (_req, res) => {
      runs++;
      const bytes = randomBytes(60_000);
      res.type('application/octet-stream');
      Readable.from(
        (async function* () {
          for (let i = 0; i < 6; i++) {
            await sleep(30);
            yield bytes.subarray(i * 10_000, (i + 1) * 10_000);
          }
        })(),
      ).pipe(res);
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

  it('a body that stream.pipeline() destroys when the client leaves costs one more run, not one per waiter', async () => {
    const app = express();
    let runs = 0;
    app.get('/piped', dogpileGuard({ cache: createCache(), hitForMissTtl: 5000 }), (_req, res) => {
      runs++;
      const bytes = randomBytes(60_000);
      res.type('application/octet-stream');
      const body = Readable.from(
        (async function* () {
          for (let i = 0; i < 6; i++) {
            await sleep(40);
            yield bytes.subarray(i * 10_000, (i + 1) * 10_000);
          }
        })(),
      );
      pipeline(body, res, () => {});
    });
    const port = await listen(app);
    const leader = request(port, '/piped', { abortOnData: true });
    while (runs === 0) await sleep(2);
    const waiters = await Promise.all(Array.from({ length: 4 }, () => fetchReply(port, '/piped')));
    expect(await leader).toBeUndefined();
    expect(runs).toBe(2);
    for (const r of waiters) {
      expect(r.body.length).toBe(60_000);
      expect(r.body.equals(waiters[0]!.body)).toBe(true);
    }
    expect(waiters.map((r) => r.xCache).sort()).toEqual(['COALESCED', 'COALESCED', 'COALESCED', 'MISS']);
    // No hit-for-miss marker: the next request is a hit.
    expect((await fetchReply(port, '/piped')).xCache).toBe('HIT');
    expect(runs).toBe(2);
  });

  it('a handler that destroys its own response mid-body releases the waiters at once: each runs its own handler', async () => {
    const app = express();
    let runs = 0;
    let entered!: () => void;
    const leaderIn = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // A wait for the lead as long as the test's own bound: waiters held until it is up fail the test.
    app.get('/cut', dogpileGuard({ cache: createCache({ waitTimeout: 600_000 }) }), async (_req, res) => {
      const run = ++runs;
      res.type('text/plain');
      if (run === 1) {
        res.write('the first part, ');
        entered();
        await gate;
        res.destroy();
        return;
      }
      res.end('whole');
    });
    const port = await listen(app);
    const leader = request(port, '/cut').catch((error: unknown) => error);
    await leaderIn;
    const waiters = Array.from({ length: 3 }, () => fetchReply(port, '/cut', { timeoutMs: 20_000 }));
    // The waiters are queued behind the lead before it breaks.
    await sleep(100);
    release();
    await leader;
    const replies = await Promise.all(waiters);
    expect(replies.map((r) => r.text)).toEqual(['whole', 'whole', 'whole']);
    // Never a copy of the broken body: each waiter ran the handler itself.
    expect(replies.every((r) => r.xCache === 'MISS')).toBe(true);
    expect(runs).toBe(4);
  }, 30_000);

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
