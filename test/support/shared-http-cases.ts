/**
 * The HTTP cases every adapter passes the same way, written once for both shared suites
 * (`test/fixtures/http-suite.ts`: Express, Fastify; `test/support/web-suite.ts`: Hono, Koa,
 * `fetch` handlers), against the app each suite starts in `describeAdapter()`.
 */
import { expect, it } from 'vitest';
import { MAX_BODY, type BaseGuard, type Harness } from './adapter-harness.js';
import { freshId } from '../../tools/basics.js';
import { fetchReply, request } from '../../tools/http-client.js';

export interface SharedCaseOptions {
  /** Routes whose responses must never be stored (each app's own set). */
  uncacheable: string[];
  /** Routes that stream their body, each with how the app streams it. */
  streamed: [route: string, how: string][];
  /** Whether the leader's own response to a body of known size says Content-Length (else it streams on, chunked). */
  leaderSendsLength: boolean;
  /** Whether the 500 of a handler that throws still says X-Cache: MISS (else the framework answers without the guard's headers). */
  errorSaysMiss: boolean;
}

export function sharedHttpCases(h: Harness<BaseGuard>, options: SharedCaseOptions): void {
  const { ran, get, all, xCaches, HIT } = h;

  it('runs the handler once for concurrent misses: one MISS, the rest COALESCED, then HIT with Age', async () => {
    const id = freshId();
    const replies = await all(20, `/slow?id=${id}&ms=200`);
    expect(ran('slow', id)).toBe(1);
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text)).toEqual({ resource: 'slow', id, query: { id, ms: '200' } });
      expect(r.text).toBe(replies[0]!.text);
    }
    expect(xCaches(replies)).toEqual([...Array<string>(19).fill('COALESCED'), 'MISS']);
    const miss = replies.find((r) => r.xCache === 'MISS')!;
    expect(miss.headers.age).toBeUndefined();
    expect(miss.headers['cache-status']).toMatch(/^dogpile-guard; fwd=miss; stored/);
    for (const r of replies.filter((r) => r.xCache === 'COALESCED')) expect(r.headers.age).toMatch(/^\d+$/);
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
    const first = await get(`/slow?id=${id}&b=2&a=1&a=0`);
    const second = await get(`/slow?a=1&id=${id}&a=0&b=2`);
    expect([first.xCache, second.xCache]).toEqual(['MISS', HIT]);
    expect(second.text).toBe(first.text);
    expect(ran('slow', id)).toBe(1);
    // The order of repeated parameters is meaningful: a=0&a=1 is another resource.
    const third = await get(`/slow?a=0&a=1&id=${id}&b=2`);
    expect(third.xCache).toBe('MISS');
    expect(ran('slow', id)).toBe(2);
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
      if (r.xCache !== 'MISS' || options.leaderSendsLength) expect(Number(r.headers['content-length'])).toBe(size);
      expect(r.body.equals(original)).toBe(true);
    }
    expect(hit.xCache).toEqual(HIT);
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

  it.each(options.uncacheable)('never serves a %s response to another client, not even to concurrent waiters', async (route) => {
    const id = freshId();
    const replies = await all(5, `/${route}?id=${id}&ms=100`);
    const later = await get(`/${route}?id=${id}&ms=100`);
    expect(ran(route, id)).toBe(6);
    for (const r of [...replies, later]) {
      expect(r.status).toBe(200);
      expect(r.xCache).toBe('MISS');
      expect(r.headers.age).toBeUndefined();
    }
    if (route === 'cookie') {
      const cookies = [...replies, later].map((r) => String(r.headers['set-cookie']));
      expect(new Set(cookies).size).toBe(6);
    } else {
      expect(new Set([...replies, later].map((r) => r.text)).size).toBe(6);
    }
  });

  it.each(['POST', 'PUT', 'DELETE'])('never caches %s, and a successful one invalidates the stored GET of its URL', async (method) => {
    const id = freshId();
    const path = `/slow?id=${id}`;
    expect((await get(path)).xCache).toBe('MISS');
    expect((await get(path)).xCache).toEqual(HIT);
    const writes = [];
    for (let i = 0; i < 3; i++) writes.push(await fetchReply(h.app().port, path, { method }));
    for (const r of writes) expect(r.xCache).toBeUndefined();
    expect(new Set(writes.map((r) => r.text)).size).toBe(3);
    expect(ran(`${method.toLowerCase()}-slow`, id)).toBe(3);
    // Deleted before the write's response was sent: the next GET runs the handler.
    expect((await get(path)).xCache).toBe('MISS');
    expect(ran('slow', id)).toBe(2);
  });

  it('does not cache a 500 and releases the waiters at once to run their own handler', async () => {
    const id = freshId();
    const before = h.waitTimeouts();
    const replies = await all(8, `/boom?id=${id}&ms=200`);
    for (const r of replies) {
      expect(r.status).toBe(500);
      if (options.errorSaysMiss) expect(r.xCache).toBe('MISS');
    }
    // One leader run, then every waiter ran its own handler as soon as the leader's 500 was known.
    expect(ran('boom', id)).toBe(8);
    expect(h.waitTimeouts()).toBe(before);
    const later = await get(`/boom?id=${id}`);
    expect(later.status).toBe(500);
    expect(ran('boom', id)).toBe(9);
  });

  it('stores only the statuses in the list (default 200)', async () => {
    const id = freshId();
    const a = await get(`/status?id=${id}&code=404`);
    const b = await get(`/status?id=${id}&code=404`);
    expect([a.status, b.status, a.xCache, b.xCache]).toEqual([404, 404, 'MISS', 'MISS']);
    expect(a.text).not.toBe(b.text);
    const with404 = await h.startExtra({ statuses: [200, 404] });
    const c = await fetchReply(with404.port, `/status?id=${id}x&code=404`);
    const d = await fetchReply(with404.port, `/status?id=${id}x&code=404`);
    expect([c.xCache, d.xCache]).toEqual(['MISS', HIT]);
    expect(d.text).toBe(c.text);
    expect(d.status).toBe(404);
  });

  it('passes a body over maxBodySize through uncached; its waiters run their own handler', async () => {
    const id = freshId();
    const size = MAX_BODY + 1;
    const replies = await all(4, `/bin?id=${id}&size=${size}&ms=100`);
    expect(ran('bin', id)).toBe(4);
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(size);
      expect(r.xCache).toBe('MISS');
    }
    expect(new Set(replies.map((r) => r.body.toString('base64'))).size).toBe(4);
    const atLimit = await all(3, `/bin?id=${id}L&size=${MAX_BODY}&ms=100`);
    expect(xCaches(atLimit)).toEqual(['COALESCED', 'COALESCED', 'MISS']);
  });

  it("serves the waiters when the leader's client hangs up before the response", async () => {
    const id = freshId();
    const path = `/slow?id=${id}&ms=300`;
    const leader = request(h.app().port, path, { abortAfter: 50 });
    await h.handlerStarted('slow', id);
    const waiters = await all(5, path);
    expect(await leader).toBeUndefined();
    expect(ran('slow', id)).toBe(1);
    for (const r of waiters) {
      expect(r.status).toBe(200);
      expect(r.xCache).toMatch(/^(COALESCED|HIT)$/);
      expect(JSON.parse(r.text).id).toBe(id);
    }
    expect((await get(path)).xCache).toEqual(HIT);
  });

  it.each(options.streamed)("shares and stores the whole body when the leader's client hangs up mid-body (%s: %s)", async (route) => {
    const id = freshId();
    const size = 200_000;
    const path = `/${route}?id=${id}&size=${size}&gap=60`;
    const leader = request(h.app().port, path, { abortOnData: true });
    await h.handlerStarted(route, id);
    const waiters = await all(4, path);
    expect(await leader).toBeUndefined();
    expect(ran(route, id)).toBe(1);
    for (const r of waiters) {
      expect(r.status).toBe(200);
      expect(r.xCache).toMatch(/^(COALESCED|HIT)$/);
      expect(r.body.equals(waiters[0]!.body)).toBe(true);
    }
    expect(waiters[0]!.body.length).toBe(size);
    const after = await get(path);
    expect(after.xCache).toEqual(HIT);
    expect(after.body.equals(waiters[0]!.body)).toBe(true);
    expect(ran(route, id)).toBe(1);
  });

  it('keys on the request headers a response varies on; never serves another variant', async () => {
    const id = freshId();
    const path = `/vary?id=${id}`;
    const langs = ['en', 'de', 'en', 'fr', 'de', 'en', 'fr'];
    const replies = [];
    for (const lang of langs) replies.push(await get(path, { 'accept-language': lang }));
    replies.forEach((r, i) => expect(r.text).toBe(`lang=${langs[i]}`));
    expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'MISS', HIT, 'MISS', HIT, HIT, HIT]);
    const none = await get(path);
    expect(none.text).toBe('lang=-');
  });

  it('lets skipped requests through untouched', async () => {
    const r = await get('/__ping');
    expect(r.text).toBe('pong');
    expect(r.xCache).toBeUndefined();
  });

  it('uses the default cache when none is given, and refuses a bad option naming it', async () => {
    const defaults = await h.startOwn({});
    const id = freshId();
    const a = await fetchReply(defaults.port, `/slow?id=${id}`);
    const b = await fetchReply(defaults.port, `/slow?id=${id}`);
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
    await expect(h.startOwn({ privateHeaders: ['x api key'] })).rejects.toThrow(/Invalid privateHeaders/);
  });
}
