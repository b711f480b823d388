/**
 * The HTTP behaviour every web-standard adapter shares (Hono, Koa, a plain `fetch` handler),
 * run against a real app of one framework over real sockets: once with an in-process cache,
 * once with a cache on a throwaway Redis. The cases every adapter passes alike are in
 * `shared-http-cases.ts`; these are the rest.
 */
import { expect, it } from 'vitest';
import { describeAdapter, type AppFactory } from './adapter-harness.js';
import { sharedHttpCases } from './shared-http-cases.js';
import { startWebApp, type WebFramework, type WebGuardOptions } from '../fixtures/web-apps.js';
import { freshId, sleep, waitUntil } from '../../tools/basics.js';
import { fetchReply, rawRequest } from '../../tools/http-client.js';

export function webAdapterSuite(framework: WebFramework): void {
  const factory: AppFactory<WebGuardOptions> = { framework, prefix: 'w', start: (options) => startWebApp(framework, options) };
  describeAdapter(factory, (h) => {
    const { ran, get, all, HIT } = h;

    sharedHttpCases(h, {
      uncacheable: ['cookie', 'private', 'no-store', 'vary-star'],
      streamed: [['stream', 'a stream of chunks']],
      // The handler's Response goes on as it comes: Hono's and a fetch handler's leader get it chunked.
      leaderSendsLength: false,
      // Hono's onError answers through the guard; Koa's error handling and a thrown fetch handler do not.
      errorSaysMiss: framework === 'hono' || framework === 'hono-app',
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
      const heads = await Promise.all(Array.from({ length: 10 }, () => fetchReply(h.app().port, path, { method: 'HEAD' })));
      expect(ran('slow', id)).toBe(1);
      for (const r of heads) {
        expect(r.status).toBe(200);
        expect(r.body.length).toBe(0);
      }
      const full = await get(path);
      expect(full.xCache).toEqual(HIT);
      expect(JSON.parse(full.text).id).toBe(id);
      const head = await fetchReply(h.app().port, path, { method: 'HEAD' });
      expect(head.xCache).toEqual(HIT);
      expect(head.body.length).toBe(0);
      expect(Number(head.headers['content-length'])).toBe(full.body.length);
      expect(ran('slow', id)).toBe(1);
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
      const fat = () => rawRequest(h.app().port, `GET ${path} HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\nContent-Length: ${json.length}`, json);
      expect((await fat()).xCache).toBeUndefined();
      expect((await get(path, { host: 'shop.example' })).xCache).toBe('MISS');
      expect((await fat()).xCache).toBeUndefined();
      expect(ran('slow', id)).toBe(3);
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
      await h.cache().invalidateTags([`item:${id}`]);
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

    it('honours a per-route TTL, and says it in Cache-Status', async () => {
      const id = freshId();
      const path = `/route-ttl?id=${id}`;
      const first = await get(path);
      const second = await get(path);
      expect([first.xCache, second.xCache]).toEqual(['MISS', HIT]);
      // The route's own TTL (2 s), not the app's (60 s), in a hit's Cache-Status.
      if (second.xCache === 'HIT') expect(second.headers['cache-status']).toMatch(/ttl=[12]\b/);
    });
  });
}
