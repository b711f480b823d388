/**
 * `dogpile-guard/nest` in real NestJS 12 apps (Express and Fastify platforms), over real HTTP
 * and a real Redis. The cross-process proof is in nest-processes.test.ts; NestJS 11 in
 * nest11.test.ts.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheKeys } from '../src/store/key.js';
import { defaultCacheKey } from '../src/http/rules/cache-key.js';
import { createCache, InvalidOptionError } from '../src/index.js';
import { Cached, InvalidateTags } from '../src/nest/index.js';
import { useRedis } from './support/use-redis.js';
import { startNestApp, type Platform, type RunningApp } from './fixtures/nest-app-module.js';
import { freshId } from '../tools/basics.js';
import { get, json, rawRequest, type Reply } from '../tools/http-client.js';

const HOST = 'shop.example.test';
const H = { host: HOST };

const server = useRedis();
let redis: Redis;

beforeAll(() => {
  redis = server.client();
});


const count = async (name: string, run: string) => Number((await redis.get(`count:${name}:${run}`)) ?? 0);

/** PTTL of the stored entry of a GET route, as the interceptor keys it. */
const pttl = (prefix: string, path: string) => redis.pttl(cacheKeys(prefix, defaultCacheKey('GET', path, H)).value);

class CapturingLogger {
  readonly warnings: string[] = [];
  readonly errors: string[] = [];
  log() {}
  error(message: unknown) {
    this.errors.push(String(message));
  }
  debug() {}
  verbose() {}
  warn(message: unknown) {
    this.warnings.push(String(message));
  }
}

describe.each(['express', 'fastify'] as Platform[])('DogpileModule on the %s platform', (platform) => {
  let app: RunningApp;
  const prefix = `nest-${platform}`;
  const logger = new CapturingLogger();

  beforeAll(async () => {
    app = await startNestApp({ platform, redisUrl: server.url, prefix, logger });
  });

  afterAll(async () => {
    await app?.close();
  });

  const call = (path: string, headers: Record<string, string> = {}, method = 'GET') => get(app.port, path, { ...H, ...headers }, method);

  it('answers a miss from the handler and then from the cache (X-Cache, Age)', async () => {
    const run = freshId();
    const first = await call(`/items?run=${run}`);
    const second = await call(`/items?run=${run}`);
    expect(first.status).toBe(200);
    expect(json(first)).toEqual({ run, n: 1 });
    expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
    expect(second.text).toBe(first.text);
    expect(second.headers['content-type']).toBe(first.headers['content-type']);
    expect(second.headers.age).toMatch(/^\d+$/);
    expect(first.headers['cache-status']).toBe('dogpile-guard; fwd=miss');
    expect(second.headers['cache-status']).toMatch(/^dogpile-guard; hit; ttl=\d+$/);
    expect(await count('items', run)).toBe(1);
  });

  it('keys by method, host, path and sorted query', async () => {
    const run = freshId();
    const a = await call(`/items?run=${run}&b=2&a=1`);
    const sameSorted = await call(`/items?a=1&run=${run}&b=2`);
    const otherQuery = await call(`/items?run=${run}&b=3&a=1`);
    const otherHost = await call(`/items?run=${run}&b=2&a=1`, { host: 'other.example.test' });
    expect([a.xCache, sameSorted.xCache, otherQuery.xCache, otherHost.xCache]).toEqual(['MISS', 'HIT', 'MISS', 'MISS']);
    expect(await count('items', run)).toBe(3);
  });

  it('answers HEAD from the GET entry, and a HEAD miss fills it for GET', async () => {
    const run = freshId();
    const getFirst = await call(`/items?run=${run}`);
    const head = await call(`/items?run=${run}`, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.xCache).toBe('HIT');
    expect(head.text).toBe('');
    expect(Number(head.headers['content-length'])).toBe(Buffer.byteLength(getFirst.text));

    const run2 = freshId();
    const headMiss = await call(`/items?run=${run2}`, {}, 'HEAD');
    const getAfter = await call(`/items?run=${run2}`);
    expect([headMiss.xCache, getAfter.xCache]).toEqual(['MISS', 'HIT']);
    expect(json(getAfter)).toEqual({ run: run2, n: 1 });
  });

  it('runs the handler once for 40 concurrent HEAD misses, mixed with GETs', async () => {
    const run = freshId();
    const heads = await Promise.all(Array.from({ length: 40 }, () => call(`/stampede?run=${run}`, {}, 'HEAD')));
    expect(await count('stampede', run)).toBe(1);
    const full = await call(`/stampede?run=${run}`);
    expect(full.xCache).toBe('HIT');
    expect(json(full)).toMatchObject({ run, n: 1 });
    for (const r of heads) {
      expect(r.status).toBe(200);
      expect(r.text).toBe('');
      expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(full.text));
    }
    const run2 = freshId();
    const mixed = await Promise.all(Array.from({ length: 20 }, (_, i) => call(`/stampede?run=${run2}`, {}, i % 2 === 0 ? 'HEAD' : 'GET')));
    expect(await count('stampede', run2)).toBe(1);
    mixed.forEach((r, i) => (i % 2 === 0 ? expect(r.text).toBe('') : expect(json(r)).toMatchObject({ run: run2, n: 1 })));
  });

  it('runs the handler once for concurrent misses in one process', async () => {
    const run = freshId();
    const replies = await Promise.all(Array.from({ length: 50 }, () => call(`/stampede?run=${run}`)));
    expect(await count('stampede', run)).toBe(1);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
    expect(replies.every((r) => ['MISS', 'COALESCED', 'HIT'].includes(r.xCache ?? ''))).toBe(true);
  });

  it('caches the first value of an Observable', async () => {
    const run = freshId();
    const first = await call(`/observable?run=${run}`);
    const second = await call(`/observable?run=${run}`);
    expect(json(first)).toMatchObject({ run, via: 'observable' });
    expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
    expect(second.text).toBe(first.text);
  });

  it("a route's own TTL beats its controller's; a TTL can be a function of the context", async () => {
    const run = freshId();
    await call(`/ttl/class?run=${run}`);
    await call(`/ttl/route?run=${run}`);
    await call(`/ttl/dynamic?run=${run}&ttl=7000`);
    const classTtl = await pttl(prefix, `/ttl/class?run=${run}`);
    const routeTtl = await pttl(prefix, `/ttl/route?run=${run}`);
    const dynamicTtl = await pttl(prefix, `/ttl/dynamic?run=${run}&ttl=7000`);
    expect(classTtl).toBeGreaterThan(7000);
    expect(classTtl).toBeLessThanOrEqual(60_000);
    expect(routeTtl).toBeGreaterThan(0);
    expect(routeTtl).toBeLessThanOrEqual(2000);
    expect(dynamicTtl).toBeGreaterThan(2000);
    expect(dynamicTtl).toBeLessThanOrEqual(7000);
    // Both the class and the handler carry @Cached: one interceptor handles the request.
    expect((await call(`/ttl/route?run=${run}`)).xCache).toBe('HIT');
    expect(await count('ttl-route', run)).toBe(1);
  });

  it('@Cached() without a TTL uses the module default', async () => {
    const run = freshId();
    await call(`/defaults?run=${run}`);
    const ttl = await pttl(prefix, `/defaults?run=${run}`);
    expect(ttl).toBeGreaterThan(7000);
    expect(ttl).toBeLessThanOrEqual(30_000);
  });

  it('passes requests with Authorization or Cookie through, unless the key includes the identity', async () => {
    const run = freshId();
    const a1 = await call(`/me?run=${run}`, { authorization: 'Bearer alice' });
    const b1 = await call(`/me?run=${run}`, { authorization: 'Bearer bob' });
    const c1 = await call(`/me?run=${run}`, { cookie: 'sid=carol' });
    for (const r of [a1, b1, c1]) expect(r.xCache).toBeUndefined();
    expect(json(a1).user).toBe('Bearer alice');
    expect(json(b1).user).toBe('Bearer bob');
    expect(await count('me', run)).toBe(3);
    // Nothing was stored that an anonymous request could be served.
    const anon = await call(`/me?run=${run}`);
    expect(anon.xCache).toBe('MISS');
    expect(json(anon).user).toBeNull();

    const k = freshId();
    const alice1 = await call(`/me-keyed?run=${k}`, { authorization: 'Bearer alice' });
    const bob1 = await call(`/me-keyed?run=${k}`, { authorization: 'Bearer bob' });
    const alice2 = await call(`/me-keyed?run=${k}`, { authorization: 'Bearer alice' });
    expect([alice1.xCache, bob1.xCache, alice2.xCache]).toEqual(['MISS', 'MISS', 'HIT']);
    expect(json(alice2).user).toBe('Bearer alice');
    expect(json(bob1).user).toBe('Bearer bob');
    // The key function returns nothing without a user: not cached.
    const nobody = await call(`/me-keyed?run=${k}`);
    expect(nobody.xCache).toBeUndefined();
  });

  it('passes a request whose Host is not host[:port] through: Host "shop.example.test/admin" + GET /settings neither reads nor writes /admin/settings', async () => {
    const forged = (run: string) => rawRequest(app.port, `GET /settings?run=${run} HTTP/1.1\r\nHost: ${HOST}/admin`);
    // Reads: the real entry exists, and the forged request is not served it.
    const run = freshId();
    const real = await call(`/admin/settings?run=${run}`);
    expect([real.xCache, json(real).page]).toEqual(['MISS', 'admin settings']);
    expect((await call(`/admin/settings?run=${run}`)).xCache).toBe('HIT');
    const read = await forged(run);
    expect(read.status).toBe(200);
    expect(JSON.parse(read.text).page).toBe('settings');
    expect(read.xCache).toBeUndefined();
    // Writes: the forged request stores nothing the real one could be served.
    const run2 = freshId();
    for (const r of [await forged(run2), await forged(run2)]) {
      expect(JSON.parse(r.text).page).toBe('settings');
      expect(r.xCache).toBeUndefined();
    }
    expect(await count('settings', run2)).toBe(2);
    const victim = await call(`/admin/settings?run=${run2}`);
    expect([victim.xCache, json(victim).page]).toEqual(['MISS', 'admin settings']);
    expect(await count('admin-settings', run2)).toBe(1);
  });

  it("never serves or stores a GET or HEAD that carries a body: one client's body cannot decide what others get", async () => {
    const run = freshId();
    const path = `/search?run=${run}`;
    const body = '{"q":"evil"}';
    const fat = (method = 'GET') =>
      rawRequest(app.port, `${method} ${path} HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}`, body);
    const chunked = () =>
      rawRequest(app.port, `GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked`, `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    // The Express platform parses the JSON body of a GET; Fastify never reads a GET body.
    const q = platform === 'express' ? 'evil' : null;
    const first = await fat();
    expect(first.status).toBe(200);
    expect(JSON.parse(first.text).q).toBe(q);
    expect(first.xCache).toBeUndefined();
    const plain = await call(path);
    expect([plain.xCache, json(plain).q]).toEqual(['MISS', null]);
    const plainAgain = await call(path);
    expect([plainAgain.xCache, json(plainAgain).q]).toEqual(['HIT', null]);
    for (const r of [await fat(), await chunked()]) {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text).q).toBe(q);
      expect(r.xCache).toBeUndefined();
    }
    const head = await fat('HEAD');
    expect(head.status).toBe(200);
    expect(head.xCache).toBeUndefined();
    expect(await count('search', run)).toBe(5);
  });

  it('passes requests carrying one of privateHeaders through: per route with @Cached({ privateHeaders })', async () => {
    const run = freshId();
    const alice = await call(`/api-key-private?run=${run}`, { 'x-api-key': 'alice' });
    expect([alice.xCache, json(alice).key]).toEqual([undefined, 'alice']);
    const anonymous = await call(`/api-key-private?run=${run}`);
    expect([anonymous.xCache, json(anonymous).key]).toEqual(['MISS', null]);
    const bob = await call(`/api-key-private?run=${run}`, { 'x-api-key': 'bob' });
    expect([bob.xCache, json(bob).key]).toEqual([undefined, 'bob']);
    const carol = await call(`/api-key-private?run=${run}`, { authorization: 'Bearer carol' });
    expect(carol.xCache).toBeUndefined();
    expect((await call(`/api-key-private?run=${run}`)).xCache).toBe('HIT');
    expect(await count('api-key-private', run)).toBe(4);
    // Without it, X-Api-Key is not private by default: the first caller's response is shared.
    const run2 = freshId();
    const first = await call(`/api-key?run=${run2}`, { 'x-api-key': 'alice' });
    const second = await call(`/api-key?run=${run2}`, { 'x-api-key': 'bob' });
    expect([first.xCache, second.xCache, json(second).key]).toEqual(['MISS', 'HIT', 'alice']);
  });

  it('a guard still refuses on a hit and while a run is in flight (guards run before the interceptor)', async () => {
    const run = freshId();
    const key = { 'x-api-key': 'k1' };
    const [leader, refusedDuringFlight] = await Promise.all([call(`/keyed?run=${run}`, key), call(`/keyed?run=${run}`)]);
    const hit = await call(`/keyed?run=${run}`, key);
    const refused = await call(`/keyed?run=${run}`, { 'x-api-key': 'wrong' });
    expect([leader.xCache, hit.xCache]).toEqual(['MISS', 'HIT']);
    expect(json(hit)).toEqual({ run, n: 1 });
    for (const r of [refusedDuringFlight, refused]) {
      expect(r.status).toBe(403);
      expect(r.xCache).toBeUndefined();
      expect(r.text).not.toContain(run);
    }
    expect(await count('keyed', run)).toBe(1);
  });

  it('adds the request headers named by a @Header Vary to the key; no-store routes are not cached', async () => {
    const run = freshId();
    const en = await call(`/vary?run=${run}`, { 'accept-language': 'en' });
    const de = await call(`/vary?run=${run}`, { 'accept-language': 'de' });
    const en2 = await call(`/vary?run=${run}`, { 'accept-language': 'en' });
    expect([en.xCache, de.xCache, en2.xCache]).toEqual(['MISS', 'MISS', 'HIT']);
    expect(json(de).lang).toBe('de');
    expect(json(en2).lang).toBe('en');

    const ns = freshId();
    const n1 = await call(`/no-store?run=${ns}`);
    const n2 = await call(`/no-store?run=${ns}`);
    expect([n1.xCache, n2.xCache]).toEqual([undefined, undefined]);
    expect(n1.headers['cache-control']).toBe('no-store');
    expect(await count('no-store', ns)).toBe(2);
  });

  it("stores a value for the response's own lifetime (@Header, headers set inside), or not at all, as the HTTP adapters do", async () => {
    // @Header('Cache-Control', 'max-age=5') on a @Cached('1m') route: kept 5 s, not a minute.
    const fh = `/fresh-header?run=${freshId()}`;
    const [f1, f2] = [await call(fh), await call(fh)];
    expect([f1.xCache, f2.xCache]).toEqual(['MISS', 'HIT']);
    expect(await pttl(prefix, fh)).toBeGreaterThan(0);
    expect(await pttl(prefix, fh)).toBeLessThanOrEqual(5000);

    const own = (q: Record<string, string>) => `/own-headers?${new URLSearchParams({ run: freshId(), ...q }).toString()}`;
    // Set by the app with res.set / reply.header while the handler's value passes through.
    const lifetime = own({ cc: 'max-age=7' });
    const [l1, l2] = [await call(lifetime), await call(lifetime)];
    expect([l1.xCache, l2.xCache]).toEqual(['MISS', 'HIT']);
    expect(l1.headers['cache-control']).toBe('max-age=7');
    expect(await pttl(prefix, lifetime)).toBeLessThanOrEqual(7000);
    // Its own stale-while-revalidate keeps it past its lifetime.
    const swr = own({ cc: 'max-age=5, stale-while-revalidate=60' });
    await call(swr);
    expect(await pttl(prefix, swr)).toBeGreaterThan(5000);
    expect(await pttl(prefix, swr)).toBeLessThanOrEqual(65_000);

    // Never stored: no-store, max-age=0 (no validators to revalidate a value with), private in CDN-Cache-Control.
    for (const q of [{ cc: 'no-store' }, { cc: 'max-age=0' }, { cc: 'max-age=300', cdn: 'private' }] as Record<string, string>[]) {
      const path = own(q);
      const [a, b] = [await call(path), await call(path)];
      expect([a.xCache, b.xCache], JSON.stringify(q)).toEqual(['MISS', 'MISS']);
      expect(json(b).n, JSON.stringify(q)).toBe(2);
      expect(await pttl(prefix, path)).toBeLessThan(0);
    }

    // Dogpile-Cache-Control rules for this cache only and never leaves the server, whether a
    // @Header() or the app set it; browsers and CDNs still see no-store.
    for (const path of [own({ cc: 'no-store', dcc: 'max-age=300' }), `/targeted-header?run=${freshId()}`]) {
      const [a, b] = [await call(path), await call(path)];
      expect([a.xCache, b.xCache], path).toEqual(['MISS', 'HIT']);
      expect(json(b).n).toBe(1);
      for (const r of [a, b]) expect(r.headers['dogpile-cache-control'], path).toBeUndefined();
      if (path.startsWith('/targeted')) expect(b.headers['cache-control']).toBe('no-store');
      expect(await pttl(prefix, path)).toBeGreaterThan(60_000);
      expect(await pttl(prefix, path)).toBeLessThanOrEqual(300_000);
    }
    // Dogpile-Cache-Control: no-store keeps out a response other caches may store.
    const refused = own({ cc: 'max-age=300', dcc: 'no-store' });
    const [r1, r2] = [await call(refused), await call(refused)];
    expect([r1.xCache, r2.xCache]).toEqual(['MISS', 'MISS']);
    expect(r1.headers['dogpile-cache-control']).toBeUndefined();
    expect(r1.headers['cache-control']).toBe('max-age=300');
  });

  it('sends handler errors as Nest does without the cache, and does not cache them', async () => {
    const run = freshId();
    const plain = await call(`/missing-plain?run=${run}`);
    const first = await call(`/missing?run=${run}`);
    const second = await call(`/missing?run=${run}`);
    expect(plain.status).toBe(404);
    for (const r of [first, second]) {
      expect(r.status).toBe(404);
      expect(r.text).toBe(plain.text);
      expect(r.headers['content-type']).toBe(plain.headers['content-type']);
    }
    expect(json(first)).toEqual({ statusCode: 404, message: `no item ${run}`, error: 'Not Found' });
    expect(await count('missing', run)).toBe(2);

    const boom = await call(`/boom?run=${run}`);
    expect(boom.status).toBe(500);
    expect(json(boom)).toEqual({ statusCode: 500, message: 'Internal server error' });
  });

  it('hands one failed run to the requests waiting for it in the process, and caches nothing', async () => {
    const run = freshId();
    const replies = await Promise.all(Array.from({ length: 20 }, () => call(`/slow-missing?run=${run}&ms=300`)));
    expect(replies.every((r) => r.status === 404)).toBe(true);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(await count('slow-missing', run)).toBe(1);
    await call(`/slow-missing?run=${run}&ms=300`);
    expect(await count('slow-missing', run)).toBe(2);
  });

  it('does not share or store StreamableFile results: each request runs its own handler', async () => {
    const run = freshId();
    const replies = await Promise.all(Array.from({ length: 5 }, () => call(`/file?run=${run}`)));
    expect(await count('file', run)).toBe(5);
    expect(new Set(replies.map((r) => r.text))).toEqual(new Set([1, 2, 3, 4, 5].map((n) => `file ${run} #${n}`)));
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toMatch(/^text\/plain/);
      expect(r.xCache).toBe('MISS');
    }
    const streamed = await call(`/stream?run=${run}`);
    expect(streamed.text).toBe(`stream ${run} #1`);
    expect((await call(`/stream?run=${run}`)).text).toBe(`stream ${run} #2`);
  });

  it('leaves handlers that use @Res() alone, and says so once', async () => {
    const run = freshId();
    const r1 = await call(`/res?run=${run}`);
    const r2 = await call(`/res?run=${run}`);
    expect([json(r1).n, json(r2).n]).toEqual([1, 2]);
    expect([r1.xCache, r2.xCache]).toEqual([undefined, undefined]);
    const p1 = await call(`/passthrough?run=${run}`);
    const p2 = await call(`/passthrough?run=${run}`);
    expect([p1.headers['x-n'], p2.headers['x-n']]).toEqual(['1', '2']);
    expect([p1.xCache, p2.xCache]).toEqual([undefined, undefined]);
    const warnings = logger.warnings.filter((w) => w.includes('@Res()'));
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('ItemsController.res is not cached');
  });

  it('runs an interceptor written above @Cached inside it; warns once about class instances', async () => {
    const run = freshId();
    const miss = await call(`/account?run=${run}`);
    const hit = await call(`/account?run=${run}`);
    expect([miss.xCache, hit.xCache]).toEqual(['MISS', 'HIT']);
    expect(json(miss)).toEqual({ id: run, n: 1 });
    expect(hit.text).toBe(miss.text);
    // Here the handler's own value is a class instance: the cached copies will be plain objects.
    expect((await call(`/entity?run=${run}`)).xCache).toBe('MISS');
    expect((await call(`/entity?run=${run}`)).xCache).toBe('HIT');
    await call(`/entity?run=${freshId()}`);
    const warnings = logger.warnings.filter((w) => w.includes('returned Account instance'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('ItemsController.entity');
  });

  it('caches @Cached provider methods by arguments, once for concurrent calls', async () => {
    const sku = freshId('sku');
    const replies = await Promise.all(Array.from({ length: 10 }, () => call(`/quote?sku=${sku}&qty=2`)));
    expect(replies.map((r) => json(r))).toEqual(Array.from({ length: 10 }, () => ({ sku, qty: 2, n: 1 })));
    expect(json(await call(`/quote?sku=${sku}&qty=3`))).toEqual({ sku, qty: 3, n: 1 });
    expect(await count('quote', `${sku}:2`)).toBe(1);
    // The route itself is not cached: no X-Cache.
    expect(replies[0]!.xCache).toBeUndefined();
    // The default key is Class.method(<arguments as JSON>), as the Redis entry shows.
    expect(await redis.exists(cacheKeys(prefix, `PricingService.quote("${sku}",2)`).value)).toBe(1);
  });

  it("uses a provider method's key function as is, so cache.delete(key) invalidates it", async () => {
    const sku = freshId('sku');
    expect(json(await call(`/price?sku=${sku}`)).n).toBe(1);
    expect(json(await call(`/price?sku=${sku}`)).n).toBe(1);
    const direct = createCache({ redis, prefix });
    try {
      expect(await direct.delete(`price:${sku}`)).toBe(true);
    } finally {
      await direct.close();
    }
    expect(json(await call(`/price?sku=${sku}`)).n).toBe(2);
  });

  it('@Cached({ tags }) values and Dogpile-Tags are purged by invalidateTags and by @InvalidateTags after a successful write', async () => {
    const direct = createCache({ redis, prefix });
    try {
      const run = freshId();
      const url = `/tagged?run=${run}&dt=${encodeURIComponent(`shelf:${run}, all`)}`;
      const [a, b] = [await call(url), await call(url)];
      expect(a.xCache).toBe('MISS');
      expect(b.xCache).toMatch(/^(HIT|COALESCED)$/);
      expect(json(b).n).toBe(1);
      for (const r of [a, b]) expect(r.headers['dogpile-tags']).toBeUndefined();
      // A tag of @Cached({ tags: (ctx) => ... }), then one of the Dogpile-Tags header.
      await direct.invalidateTags([`run:${run}`]);
      expect(json(await call(url)).n).toBe(2);
      expect((await call(url)).xCache).toBe('HIT');
      await direct.invalidateTags([`shelf:${run}`]);
      expect(json(await call(url)).n).toBe(3);

      // @InvalidateTags: a failed write invalidates nothing, a successful one its tags.
      const failed = await call(`/tagged?run=${run}&fail=1`, {}, 'POST');
      expect(failed.status).toBe(404);
      expect((await call(url)).xCache).toBe('HIT');
      const write = await call(`/tagged?run=${run}`, {}, 'POST');
      expect(write.status).toBe(201);
      expect(json(write)).toEqual({ run, updated: true });
      const after = await call(url);
      expect([after.xCache, json(after).n]).toEqual(['MISS', 4]);

      // On a provider method too.
      const sku = freshId('sku');
      expect(json(await call(`/price?sku=${sku}`)).n).toBe(1);
      await direct.invalidateTags([`sku:${sku}`]);
      expect(json(await call(`/price?sku=${sku}`)).n).toBe(2);
    } finally {
      await direct.close();
    }
  });

  it('refuses bad tags with InvalidOptionError: from a @Cached or @InvalidateTags function, before the handler runs', async () => {
    const run = freshId();
    const read = await call(`/tagged-bad?run=${run}`);
    expect(read.status).toBe(500);
    expect(await count('tagged-bad', run)).toBe(0);
    const write = await call(`/tagged-bad?run=${run}`, {}, 'POST');
    expect(write.status).toBe(500);
    expect(await count('update-bad', run)).toBe(0);
    expect(logger.errors.join('\n')).toMatch(/Invalid tags: tag 1 is empty; every tag must be a non-empty string/);
  });

  it('gives services the cache through @InjectCache()', async () => {
    const run = freshId();
    const a = json(await call(`/direct?run=${run}`));
    const b = json(await call(`/direct?run=${run}`));
    expect(a).toEqual({ run, n: 1 });
    expect(b).toEqual(a);
    expect(await redis.exists(cacheKeys(prefix, `direct:${run}`).value)).toBe(1);
  });

  it('leaves routes without @Cached alone', async () => {
    const run = freshId();
    const r = await call(`/plain?run=${run}`);
    await call(`/plain?run=${run}`);
    expect(r.xCache).toBeUndefined();
    expect(await count('plain', run)).toBe(2);
  });
});

describe('DogpileModule configuration', () => {
  it('forRootAsync takes its options from a config provider', async () => {
    const prefix = 'nest-async';
    const app = await startNestApp({ platform: 'express', redisUrl: server.url, prefix, config: 'async', ttl: '45s' });
    try {
      const run = freshId();
      const first = await get(app.port, `/defaults?run=${run}`, H);
      const second = await get(app.port, `/defaults?run=${run}`, H);
      expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
      const ttl = await pttl(prefix, `/defaults?run=${run}`);
      expect(ttl).toBeGreaterThan(30_000);
      expect(ttl).toBeLessThanOrEqual(45_000);
    } finally {
      await app.close();
    }
  });

  it('takes privateHeaders for every route from the module options', async () => {
    const app = await startNestApp({ platform: 'express', redisUrl: server.url, prefix: 'nest-private', privateHeaders: ['X-Api-Key'] });
    try {
      const run = freshId();
      const alice = await get(app.port, `/api-key?run=${run}`, { ...H, 'x-api-key': 'alice' });
      const anonymous = await get(app.port, `/api-key?run=${run}`, H);
      const bob = await get(app.port, `/api-key?run=${run}`, { ...H, 'x-api-key': 'bob' });
      expect([alice.xCache, anonymous.xCache, bob.xCache]).toEqual([undefined, 'MISS', undefined]);
      expect([json(alice).key, json(anonymous).key, json(bob).key]).toEqual(['alice', null, 'bob']);
      // The module's list replaced the default one.
      const withAuth = await get(app.port, `/api-key?run=${run}`, { ...H, authorization: 'Bearer carol' });
      expect(withAuth.xCache).toBe('HIT');
    } finally {
      await app.close();
    }
    await expect(startNestApp({ platform: 'express', redisUrl: server.url, prefix: 'nest-private', privateHeaders: ['x api key'] })).rejects.toThrow(
      /Invalid privateHeaders/,
    );
  });

  it('does not close a Redis client it was given', async () => {
    const client = server.client();
    const app = await startNestApp({ platform: 'fastify', redisUrl: server.url, prefix: 'nest-client', config: 'client', client });
    const run = freshId();
    const replies: Reply[] = [];
    for (let i = 0; i < 2; i++) replies.push(await get(app.port, `/items?run=${run}`, H));
    expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'HIT']);
    await app.close();
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
    await client.quit();
  });

  it('checks @Cached options when the decorator is applied', () => {
    expect(() => Cached('soon' as never)).toThrow(InvalidOptionError);
    expect(() => Cached(-5)).toThrow(/ttl/);
    expect(() => Cached({ ttl: '1m', keys: () => 'x' } as never)).toThrow(/keys/);
    expect(() => Cached({ key: 'fixed' } as never)).toThrow(/key/);
    expect(() => Cached({ privateHeaders: ['x-api-key', ''] })).toThrow(/Invalid privateHeaders/);
    expect(() => Cached({ privateHeaders: 'x-api-key' as never })).toThrow(InvalidOptionError);
    expect(() => Cached({ tags: ['a', ''] })).toThrow(/^Invalid tags: tag 1 is empty/);
    expect(() => Cached({ tags: 'a' as never })).toThrow(/^Invalid tags: expected an array of tags or a function/);
    expect(() => Cached({ tags: Array.from({ length: 65 }, (_, i) => `t${i}`) })).toThrow(/at most 64/);
    expect(() => InvalidateTags([''])).toThrow(/^Invalid tags: tag 0 is empty/);
    expect(() => InvalidateTags([42] as never)).toThrow(InvalidOptionError);
  });
});
