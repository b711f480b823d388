/**
 * The HTTP behaviour every web-standard adapter shares (Hono, Koa, a plain `fetch` handler),
 * run against a real app of one framework over real sockets: once with an in-process cache,
 * once with a cache on a throwaway Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../../src/index.js';
import { useRedis } from './use-redis.js';
import { startWebApp, type WebFramework, type WebApp, type WebGuardOptions } from '../fixtures/web-apps.js';
import { freshId, sleep, waitUntil } from '../../tools/basics.js';
import { fetchReply, rawRequest, request, type Reply } from '../../tools/http-client.js';

const MAX_BODY = 300_000;

export function webAdapterSuite(framework: WebFramework): void {
  describe.each(['memory', 'redis'] as const)(`${framework} adapter, %s cache`, (backend) => {
    const redis = backend === 'redis' ? useRedis() : undefined;
    let cache: DogpileCache;
    let app: WebApp;
    const runs = new Map<string, number>();
    const extraApps: WebApp[] = [];
    const ran = (route: string, id: string) => runs.get(`${route}:${id}`) ?? 0;
    const count = (route: string, id: string) => {
      runs.set(`${route}:${id}`, ran(route, id) + 1);
    };
    const get = (path: string, headers?: Record<string, string>) => fetchReply(app.port, path, { headers });
    const all = (n: number, path: string, headers?: Record<string, string>) => Promise.all(Array.from({ length: n }, () => get(path, headers)));
    const handlerStarted = (route: string, id: string) => waitUntil(`${route} started`, () => ran(route, id) > 0, 10_000, 2);
    const xCaches = (replies: Reply[]) => replies.map((r) => r.xCache).sort();
    // A request sent right after the leader's response may still find the store-and-release
    // round trip to Redis in flight: it then waits for it and says COALESCED instead of HIT.
    const HIT: unknown = backend === 'memory' ? 'HIT' : expect.stringMatching(/^(HIT|COALESCED)$/);

    async function startExtra(guard: WebGuardOptions): Promise<WebApp> {
      const extra = await startWebApp(framework, { guard: { cache, ...guard }, count });
      extraApps.push(extra);
      return extra;
    }

    beforeAll(async () => {
      cache = redis ? createCache({ redis: redis.client(), prefix: `w${framework}` }) : createCache();
      app = await startWebApp(framework, { guard: { cache, maxBodySize: MAX_BODY }, count, routeTtl: 2000 });
    });

    afterAll(async () => {
      await app?.close();
      for (const extra of extraApps) await extra.close();
      await cache?.close();
    });

    it('runs the handler once for concurrent misses: one MISS, the rest COALESCED, then HIT with Age', async () => {
      const id = freshId();
      const replies = await all(20, `/slow?id=${id}&ms=200`);
      expect(ran('slow', id)).toBe(1);
      for (const r of replies) {
        expect(r.status).toBe(200);
        expect(JSON.parse(r.text)).toEqual({ resource: 'slow', id, query: { id, ms: '200' } });
      }
      expect(xCaches(replies)).toEqual([...Array<string>(19).fill('COALESCED'), 'MISS']);
      expect(replies.find((r) => r.xCache === 'MISS')!.headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss; stored/);
      const hit = await get(`/slow?id=${id}&ms=200`);
      expect(hit.xCache).toEqual(HIT);
      expect(hit.headers.age).toMatch(/^\d+$/);
      expect(hit.text).toBe(replies[0]!.text);
      expect(hit.headers['content-type']).toBe(replies[0]!.headers['content-type']);
      expect(Number(hit.headers['content-length'])).toBe(hit.body.length);
      expect(ran('slow', id)).toBe(1);
    });

    it('does not split the cache on query parameter order', async () => {
      const id = freshId();
      const first = await get(`/slow?id=${id}&b=2&a=1`);
      const second = await get(`/slow?a=1&id=${id}&b=2`);
      expect([first.xCache, second.xCache]).toEqual(['MISS', HIT]);
      expect(second.text).toBe(first.text);
      expect(ran('slow', id)).toBe(1);
    });

    it.each([
      ['inline in the wake-up message', 1_000],
      ['over inlineMax, read back from the store', 200_000],
    ])('serves binary bodies byte-exact (%s)', async (_label, size) => {
      const id = freshId();
      const replies = await all(6, `/bin?id=${id}&size=${size}&ms=100`);
      const hit = await get(`/bin?id=${id}&size=${size}&ms=100`);
      expect(ran('bin', id)).toBe(1);
      const original = replies.find((r) => r.xCache === 'MISS')!.body;
      expect(original.length).toBe(size);
      for (const r of [...replies, hit]) {
        expect(r.headers['content-type']).toBe('application/octet-stream');
        expect(r.body.equals(original)).toBe(true);
      }
      expect(hit.xCache).toEqual(HIT);
    });

    it("streams a body to the leader's client while capturing it; waiters and later requests get the stored bytes", async () => {
      const id = freshId();
      const path = `/stream?id=${id}&size=150000&gap=40`;
      const replies = await all(5, path);
      const hit = await get(path);
      expect(ran('stream', id)).toBe(1);
      const leader = replies.find((r) => r.xCache === 'MISS')!;
      expect(leader.body.length).toBe(150_000);
      // The leader's response was not held until the end: it came chunked, as the handler streamed it.
      expect(leader.headers['transfer-encoding']).toBe('chunked');
      for (const r of [...replies, hit]) expect(r.body.equals(leader.body)).toBe(true);
      expect(Number(hit.headers['content-length'])).toBe(150_000);
    });

    it('answers HEAD from the GET entry, and coalesces HEAD misses into one run that stores the GET response', async () => {
      const id = freshId();
      const path = `/slow?id=${id}&ms=200`;
      const heads = await Promise.all(Array.from({ length: 10 }, () => fetchReply(app.port, path, { method: 'HEAD' })));
      expect(ran('slow', id)).toBe(1);
      for (const r of heads) {
        expect(r.status).toBe(200);
        expect(r.body.length).toBe(0);
      }
      const full = await get(path);
      expect(full.xCache).toEqual(HIT);
      expect(JSON.parse(full.text).id).toBe(id);
      const head = await fetchReply(app.port, path, { method: 'HEAD' });
      expect(head.xCache).toEqual(HIT);
      expect(head.body.length).toBe(0);
      expect(Number(head.headers['content-length'])).toBe(full.body.length);
      expect(ran('slow', id)).toBe(1);
    });

    it.each([
      ['authorization', 'Bearer alice'],
      ['cookie', 'session=alice'],
    ])('passes requests with %s through: neither served from nor written to the cache', async (header, value) => {
      const id = freshId();
      const anonymous = await get(`/whoami?id=${id}`);
      expect(anonymous.xCache).toBe('MISS');
      const withCredentials = await all(3, `/whoami?id=${id}`, { [header]: value });
      for (const r of withCredentials) {
        expect(r.xCache).toBeUndefined();
        expect(r.text).toContain(value);
        expect(r.headers['cache-status']).toBe(`dogpile-guard; fwd=bypass; detail=${header}`);
      }
      const again = await get(`/whoami?id=${id}`);
      expect(again.xCache).toEqual(HIT);
      expect(again.text).toBe('auth=- cookie=-');
      expect(ran('whoami', id)).toBe(4);
    });

    it.each(['cookie', 'private', 'no-store', 'vary-star'])('never stores a %s response; the waiters run their own handler', async (route) => {
      const id = freshId();
      const replies = await all(4, `/${route}?id=${id}&ms=100`);
      const later = await get(`/${route}?id=${id}`);
      expect(ran(route, id)).toBe(5);
      for (const r of [...replies, later]) {
        expect(r.status).toBe(200);
        expect(r.xCache).toBe('MISS');
      }
    });

    it('reads Dogpile-Cache-Control (stored although Cache-Control says no-store) and never sends it', async () => {
      const id = freshId();
      const first = await get(`/targeted?id=${id}`);
      const second = await get(`/targeted?id=${id}`);
      expect([first.xCache, second.xCache]).toEqual(['MISS', HIT]);
      expect(second.text).toBe(first.text);
      for (const r of [first, second]) {
        expect(r.headers['dogpile-cache-control']).toBeUndefined();
        expect(r.headers['cache-control']).toBe('no-store');
      }
    });

    it.each(['POST', 'PUT', 'DELETE'])('never caches %s, and a successful one invalidates the stored GET of its URL', async (method) => {
      const id = freshId();
      const path = `/slow?id=${id}`;
      expect((await get(path)).xCache).toBe('MISS');
      expect((await get(path)).xCache).toEqual(HIT);
      const writes = [await fetchReply(app.port, path, { method }), await fetchReply(app.port, path, { method })];
      for (const r of writes) expect(r.xCache).toBeUndefined();
      expect(new Set(writes.map((r) => r.text)).size).toBe(2);
      expect(ran(`${method.toLowerCase()}-slow`, id)).toBe(2);
      // Deleted before the write's response was sent: the next GET runs the handler.
      expect((await get(path)).xCache).toBe('MISS');
      expect(ran('slow', id)).toBe(2);
    });

    it('keys on the Host header: requests for two hosts never share an entry, and a forwarded host cannot poison the real one', async () => {
      const id = freshId();
      const path = `/host?id=${id}`;
      const a = await get(path, { host: 'shop.example' });
      const b = await get(path, { host: 'other.example' });
      const a2 = await get(path, { host: 'shop.example' });
      expect([a.text, b.text, a2.text]).toEqual(['host=shop.example', 'host=other.example', 'host=shop.example']);
      expect([a.xCache, b.xCache, a2.xCache]).toEqual(['MISS', 'MISS', HIT]);
      // The app trusts X-Forwarded-Host: a request with it gets an entry of its own.
      const forged = await get(path, { host: 'shop.example', 'x-forwarded-host': 'evil.example' });
      expect([forged.text, forged.xCache]).toEqual(['host=evil.example', 'MISS']);
      const real = await get(path, { host: 'shop.example' });
      expect([real.text, real.xCache]).toEqual(['host=shop.example', HIT]);
      expect(ran('host', id)).toBe(3);
    });

    it('never serves or stores a GET that carries a body', async () => {
      const id = freshId();
      const path = `/slow?id=${id}`;
      const json = '{"q":"evil"}';
      const fat = () => rawRequest(app.port, `GET ${path} HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\nContent-Length: ${json.length}`, json);
      expect((await fat()).xCache).toBeUndefined();
      expect((await get(path, { host: 'shop.example' })).xCache).toBe('MISS');
      expect((await fat()).xCache).toBeUndefined();
      expect(ran('slow', id)).toBe(3);
    });

    it('does not cache a 500 and releases the waiters at once to run their own handler', async () => {
      const id = freshId();
      const replies = await all(6, `/boom?id=${id}&ms=200`);
      for (const r of replies) expect(r.status).toBe(500);
      expect(ran('boom', id)).toBe(6);
      expect((await get(`/boom?id=${id}`)).status).toBe(500);
      expect(ran('boom', id)).toBe(7);
    });

    it('stores only the statuses in the list (default 200)', async () => {
      const id = freshId();
      const a = await get(`/status?id=${id}&code=404`);
      const b = await get(`/status?id=${id}&code=404`);
      expect([a.status, b.status, a.xCache, b.xCache]).toEqual([404, 404, 'MISS', 'MISS']);
      const with404 = await startExtra({ statuses: [200, 404] });
      const c = await fetchReply(with404.port, `/status?id=${id}x&code=404`);
      const d = await fetchReply(with404.port, `/status?id=${id}x&code=404`);
      expect([c.xCache, d.xCache]).toEqual(['MISS', HIT]);
      expect(d.text).toBe(c.text);
      expect(d.status).toBe(404);
    });

    it('passes a body over maxBodySize through uncached', async () => {
      const id = freshId();
      const replies = await all(3, `/bin?id=${id}&size=${MAX_BODY + 1}&ms=100`);
      expect(ran('bin', id)).toBe(3);
      for (const r of replies) expect(r.body.length).toBe(MAX_BODY + 1);
    });

    it('keys on the request headers a response varies on; never serves another variant', async () => {
      const id = freshId();
      const path = `/vary?id=${id}`;
      const langs = ['en', 'de', 'en', 'de'];
      const replies = [];
      for (const lang of langs) replies.push(await get(path, { 'accept-language': lang }));
      replies.forEach((r, i) => expect(r.text).toBe(`lang=${langs[i]}`));
      expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'MISS', HIT, HIT]);
    });

    it('answers a conditional request from the cache with a 304, and the leader\'s own conditional request too', async () => {
      const id = freshId();
      const path = `/fresh?id=${id}`;
      const tag = `"f-${id}"`;
      // The leader's client sends If-None-Match: it gets a 304, the store the full response.
      const leader = await get(path, { 'if-none-match': tag });
      expect(leader.status).toBe(304);
      expect(leader.body.length).toBe(0);
      const full = await get(path);
      expect(full.status).toBe(200);
      expect(full.xCache).toEqual(HIT);
      expect(full.text).toMatch(new RegExp(`^fresh body ${id} `));
      const conditional = await get(path, { 'if-none-match': tag });
      expect(conditional.status).toBe(304);
      expect(conditional.xCache).toEqual(HIT);
      expect(conditional.headers.etag).toBe(tag);
      expect(ran('fresh', id)).toBe(1);
    });

    it('revalidates a stored response that must be (max-age=0 with an ETag): a 304 from the handler renews it', async () => {
      const id = freshId();
      const path = `/etag?id=${id}`;
      const first = await get(path);
      expect([first.status, first.xCache]).toEqual([200, 'MISS']);
      const second = await get(path);
      // The handler ran with If-None-Match and answered 304; the client got the stored body.
      expect(second.status).toBe(200);
      expect(second.text).toBe(`etag body ${id}`);
      expect(ran('etag', id)).toBe(2);
    });

    it('answers a Range request from the stored response with a 206', async () => {
      const id = freshId();
      const path = `/bin?id=${id}&size=1000`;
      const full = await get(path);
      const part = await get(path, { range: 'bytes=10-19' });
      expect(part.status).toBe(206);
      expect(part.headers['content-range']).toBe('bytes 10-19/1000');
      expect(part.body.equals(full.body.subarray(10, 20))).toBe(true);
      expect(ran('bin', id)).toBe(1);
    });

    it('takes Dogpile-Tags off the response and invalidates by tag', async () => {
      const id = freshId();
      const path = `/tagged?id=${id}`;
      const first = await get(path);
      expect(first.headers['dogpile-tags']).toBeUndefined();
      expect((await get(path)).xCache).toEqual(HIT);
      await cache.invalidateTags([`item:${id}`]);
      const after = await get(path);
      expect(after.xCache).toBe('MISS');
      expect(after.text).not.toBe(first.text);
      expect(ran('tagged', id)).toBe(2);
    });

    it('serves a stale response at once inside stale-while-revalidate, and one refresh replaces it', async () => {
      const id = freshId();
      const path = `/swr?id=${id}&maxage=1&swr=30&ms=300`;
      const first = await get(path);
      expect(first.xCache).toBe('MISS');
      // Past max-age=1 on any clock rounding (the Age counts whole seconds).
      await sleep(2100);
      const replies = await all(6, path);
      const stale = replies.filter((r) => r.xCache === 'STALE');
      expect(stale.every((r) => r.text === first.text)).toBe(true);
      // The refresh runs detached, on a reconstructed request (Hono's through the app given to the
      // middleware): every request gets the stale copy at once.
      expect(stale).toHaveLength(6);
      await waitUntil('the refresh ran', () => ran('swr', id) === 2);
      const fresh = await waitUntil('the refreshed response is served', async () => {
        const r = await get(path);
        return r.text !== first.text && r;
      });
      expect(fresh.xCache).toEqual(HIT);
      expect(ran('swr', id)).toBe(2);
    });

    it("serves the waiters when the leader's client hangs up before the response", async () => {
      const id = freshId();
      const path = `/slow?id=${id}&ms=300`;
      const leader = request(app.port, path, { abortAfter: 50 });
      await handlerStarted('slow', id);
      const waiters = await all(4, path);
      expect(await leader).toBeUndefined();
      expect(ran('slow', id)).toBe(1);
      for (const r of waiters) expect(JSON.parse(r.text).id).toBe(id);
    });

    it("shares and stores the whole body when the leader's client hangs up mid-body", async () => {
      const id = freshId();
      const size = 200_000;
      const path = `/stream?id=${id}&size=${size}&gap=60`;
      const leader = request(app.port, path, { abortOnData: true });
      await handlerStarted('stream', id);
      const waiters = await all(3, path);
      expect(await leader).toBeUndefined();
      expect(ran('stream', id)).toBe(1);
      for (const r of waiters) {
        expect(r.status).toBe(200);
        expect(r.body.equals(waiters[0]!.body)).toBe(true);
      }
      expect(waiters[0]!.body.length).toBe(size);
      expect((await get(path)).xCache).toEqual(HIT);
      expect(ran('stream', id)).toBe(1);
    });

    it('honours a per-route TTL, and lets skipped requests through untouched', async () => {
      const id = freshId();
      const path = `/route-ttl?id=${id}`;
      const first = await get(path);
      const second = await get(path);
      expect([first.xCache, second.xCache]).toEqual(['MISS', HIT]);
      // The route's own TTL (2 s), not the app's (60 s), in a hit's Cache-Status.
      if (second.xCache === 'HIT') expect(second.headers['cache-status']).toMatch(/ttl=[12]\b/);
      const ping = await get('/__ping');
      expect([ping.text, ping.xCache]).toEqual(['pong', undefined]);
    });

    it('uses the default cache when none is given, and refuses a bad option naming it', async () => {
      const defaults = await startWebApp(framework, { guard: {}, count });
      extraApps.push(defaults);
      const id = freshId();
      const a = await fetchReply(defaults.port, `/slow?id=${id}`);
      const b = await fetchReply(defaults.port, `/slow?id=${id}`);
      expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
      await expect(startWebApp(framework, { guard: { privateHeaders: ['x api key'] }, count })).rejects.toThrow(/privateHeaders/);
    });
  });
}
