/**
 * Shared-cache behaviours checked against origins that set their headers as real ones do, on
 * every adapter (Express, Fastify, Nest on both platforms), with a real Redis and real HTTP:
 * - a response of any final status with explicit freshness is stored (RFC 9111 §3);
 * - a response's own `stale-while-revalidate` window ends where it says, and a revalidation
 *   answered `no-cache` sends the next request to the origin (RFC 5861 §3);
 * - a stored response that allows it is served stale when the origin fails (RFC 5861 §4), never
 *   one that forbids serving stale (RFC 9111 §4.2.4).
 * The waits are the shortest the directives allow (whole seconds).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, type Reply } from '../tools/http-client.js';
import { Origin, startOriginApp, type OriginApp, type OriginFramework, type Step } from './fixtures/http-origin-apps.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();
const FRAMEWORKS: OriginFramework[] = ['express', 'fastify', 'nest-express', 'nest-fastify'];

/** The run of the origin that produced a reply (`<id> run N`, or Nest's `{ "run": N }`). */
function runOf(reply: Reply): number | undefined {
  const m = /run\D{0,3}(\d+)/.exec(reply.text);
  return m === null ? undefined : Number(m[1]);
}

const cc = (value: string): Step => ({ headers: { 'cache-control': value } });

describe.each(FRAMEWORKS)('%s', (framework) => {
  const nest = framework.startsWith('nest');
  const caches: DogpileCache[] = [];
  const apps: OriginApp[] = [];

  async function start(guard: Parameters<typeof startOriginApp>[3] = {}): Promise<{ origin: Origin; port: number }> {
    const cache = createCache({ redis: server.url, prefix: freshId('conf') });
    caches.push(cache);
    const origin = new Origin();
    const app = await startOriginApp(framework, origin, cache, guard);
    apps.push(app);
    return { origin, port: app.port };
  }

  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const cache of caches) await cache.close();
  });

  describe('explicit freshness on any final status', () => {
    it.skipIf(nest).each([60_000, 0])('stores a 302, 307, 400, 500, 503 or 599 that says how long it is fresh (ttl %i)', async (ttl) => {
      const { origin, port } = await start({ ttl });
      const inAnHour = new Date(Date.now() + 3_600_000).toUTCString();
      const cases: [string, Step][] = [
        ['s302', { status: 302, headers: { location: '/elsewhere', 'cache-control': 'max-age=3600' } }],
        ['s307', { status: 307, headers: { location: '/elsewhere', 'cache-control': 'max-age=3600' } }],
        ['s400', { status: 400, headers: { 'cache-control': 'max-age=3600' } }],
        ['s500', { status: 500, headers: { 'cache-control': 's-maxage=3600' } }],
        ['s503', { status: 503, headers: { expires: inAnHour, date: new Date().toUTCString() } }],
        ['s599', { status: 599, headers: { 'cache-control': 'max-age=3600' } }],
      ];
      for (const [id, step] of cases) origin.script(id, step);
      for (const [id, step] of cases) {
        const first = await fetchReply(port, `/o/${id}`);
        expect([id, first.status, first.xCache]).toEqual([id, step.status, 'MISS']);
        // From the stored response (or, while it is being stored, from the first run's flight).
        const second = await fetchReply(port, `/o/${id}`);
        expect([id, second.status, runOf(second)]).toEqual([id, step.status, 1]);
        expect(['HIT', 'COALESCED']).toContain(second.xCache);
        if (step.headers?.location !== undefined) expect(second.headers.location).toBe('/elsewhere');
        expect(origin.runs(id)).toBe(1);
      }
    });

    it.skipIf(nest)('with a default ttl, the statuses list decides for a response that says nothing; `public` lets the default ttl apply to any status', async () => {
      const { origin, port } = await start({ ttl: 60_000 });
      origin.script('silent400', { status: 400 });
      origin.script('silent500', { status: 500 });
      origin.script('public500', { status: 500, headers: { 'cache-control': 'public' } });
      for (const id of ['silent400', 'silent500', 'public500']) {
        await fetchReply(port, `/o/${id}`);
        await fetchReply(port, `/o/${id}`);
      }
      expect([origin.runs('silent400'), origin.runs('silent500'), origin.runs('public500')]).toEqual([2, 2, 1]);
      const { origin: strict, port: strictPort } = await start({ ttl: 0 });
      // Without a default ttl there is no lifetime for `public` alone to use.
      strict.script('public500', { status: 500, headers: { 'cache-control': 'public' } });
      await fetchReply(strictPort, '/o/public500');
      await fetchReply(strictPort, '/o/public500');
      expect(strict.runs('public500')).toBe(2);
    });

    it.runIf(nest)("stores a route's 503 or 400 that says how long it is fresh, and serves it with that status; not one that says nothing", async () => {
      const { origin, port } = await start({ ttl: 60_000 });
      origin.script('a');
      origin.script('b', cc('max-age=3600'));
      origin.script('c');
      const replies: Reply[] = [];
      for (const path of ['/s503/a', '/s503/a', '/s400/b', '/s400/b', '/s400/c', '/s400/c']) replies.push(await fetchReply(port, path));
      expect(replies.map((r) => [r.status, r.xCache, runOf(r)])).toEqual([
        [503, 'MISS', 1],
        [503, 'HIT', 1],
        [400, 'MISS', 1],
        [400, 'HIT', 1],
        [400, 'MISS', 1],
        [400, 'MISS', 2],
      ]);
    });
  });

  it("ends a response's own stale-while-revalidate window where it says, and after a revalidation answered no-cache", async () => {
    // The adapter's own window (30 s) is far longer: only the response's can end it in time.
    // The request that revalidates runs the handler, so the burst ends with the revalidation.
    const { origin, port } = await start({ ttl: 60_000, staleWhileRevalidate: '30s', refresh: 'foreground' });
    origin.script('end', cc('max-age=1, stale-while-revalidate=4'), { ...cc('max-age=1, stale-while-revalidate=4'), delay: 300 });
    origin.script('nc', cc('max-age=1, stale-while-revalidate=4'), { ...cc('no-cache'), delay: 300 }, cc('no-cache'));
    const t0 = performance.now();
    expect((await fetchReply(port, '/o/end')).xCache).toBe('MISS');
    expect((await fetchReply(port, '/o/nc')).xCache).toBe('MISS');
    await sleep(1500);
    // Inside the window: served stale while one request revalidates (its handler answers no-cache).
    const burst = await Promise.all([1, 2, 3].map(() => fetchReply(port, '/o/nc')));
    expect(burst.some((r) => r.xCache === 'STALE' && runOf(r) === 1)).toBe(true);
    // (Each request that came after the revalidation ended went to the origin.)
    for (const r of burst) if (r.xCache !== 'STALE') expect(runOf(r)).toBeGreaterThanOrEqual(2);
    // Still inside the stored response's window, but the revalidation said no-cache: once its
    // answer has been stored (it is written after the revalidating request's own response, so
    // a request right after may still meet the old copy), every request goes to the origin.
    let after = await fetchReply(port, '/o/nc');
    for (let i = 0; i < 20 && after.xCache === 'STALE'; i++) {
      await sleep(50);
      after = await fetchReply(port, '/o/nc');
    }
    expect([after.xCache, runOf(after)]).toEqual(['MISS', origin.runs('nc')]);
    const next = await fetchReply(port, '/o/nc');
    expect([next.xCache, runOf(next)]).toEqual(['MISS', origin.runs('nc')]);
    // Past max-age (1 s) + stale-while-revalidate (4 s): the origin again.
    await sleep(Math.max(0, 5600 - (performance.now() - t0)));
    // (Inside the window, all but the one request that refreshes would get the stale copy.)
    const late = await Promise.all([1, 2, 3].map(() => fetchReply(port, '/o/end')));
    expect(late.map((r) => [r.xCache === 'STALE', runOf(r)])).toEqual([1, 2, 3].map(() => [false, 2]));
    expect(origin.runs('end')).toBe(2);
  }, 15_000);

  describe('stale when the origin fails', () => {
    const failures: [string, Step][] = nest
      ? [
          ['throw', { fail: 'throw' }],
          ['unavailable', { fail: 'unavailable' }],
          ['upstream', { fail: 'upstream' }],
        ]
      : [
          ['throw', { fail: 'throw' }],
          ['upstream', { fail: 'upstream' }],
          ['500', { status: 500 }],
          ['502', { status: 502 }],
          ['503', { status: 503, headers: { 'retry-after': '5' } }],
          ['504', { status: 504 }],
          ['503-streamed', { status: 503, stream: true }],
        ];

    it('serves a stored response that allows it (stale-if-error) when the handler throws, its upstream closes, or it answers a 5xx', async () => {
      const { origin, port } = await start({ ttl: 60_000 });
      for (const [id, failure] of failures) origin.script(id, cc('max-age=1, stale-if-error=60'), failure);
      for (const [id] of failures) expect((await fetchReply(port, `/o/${id}`)).xCache).toBe('MISS');
      await sleep(1500);
      for (const [id] of failures) {
        const reply = await fetchReply(port, `/o/${id}`);
        expect([id, reply.status, reply.xCache, runOf(reply)]).toEqual([id, 200, 'STALE', 1]);
        if (!nest) expect(reply.headers['cache-status']).toMatch(/^dogpile-guard; hit; ttl=-\d+; detail=stale-if-error$/);
        expect(origin.runs(id)).toBe(2);
        // Still there for the next request, without another try at once (failSafeRetry).
        const again = await fetchReply(port, `/o/${id}`);
        expect([id, again.status, runOf(again)]).toEqual([id, 200, 1]);
        expect(origin.runs(id)).toBe(2);
      }
    });

    it('serves the requests that waited for the failing run the same stale response, with one handler run', async () => {
      const { origin, port } = await start({ ttl: 60_000 });
      // The failing run takes a while, so that the others arrive while it runs and wait for it.
      origin.script('slow', cc('max-age=1, stale-if-error=60'), nest ? { fail: 'unavailable', delay: 300 } : { status: 503, delay: 300 });
      await fetchReply(port, '/o/slow');
      await sleep(1500);
      const replies = await Promise.all([1, 2, 3, 4].map(() => fetchReply(port, '/o/slow')));
      expect(replies.map((r) => [r.status, runOf(r)])).toEqual([1, 2, 3, 4].map(() => [200, 1]));
      expect(origin.runs('slow')).toBe(2);
    });

    it("serves one on the adapter's staleIfError, never one that says must-revalidate, proxy-revalidate, no-cache or s-maxage", async () => {
      const { origin, port } = await start({ ttl: 60_000, staleIfError: '60s' });
      const fail: Step = nest ? { fail: 'unavailable' } : { status: 503 };
      const cases: [string, Step, boolean][] = [
        ['plain', cc('max-age=1'), true],
        ['must', cc('max-age=1, must-revalidate, stale-if-error=60'), false],
        ['proxy', cc('max-age=1, proxy-revalidate, stale-if-error=60'), false],
        ['shared', cc('s-maxage=1, stale-if-error=60'), false],
        ['nocache', { headers: { 'cache-control': 'no-cache, stale-if-error=60', etag: '"v1"' } }, false],
      ];
      for (const [id, stored] of cases) origin.script(id, stored, fail);
      for (const [id] of cases) await fetchReply(port, `/o/${id}`);
      await sleep(1500);
      for (const [id, , stale] of cases) {
        const reply = await fetchReply(port, `/o/${id}`);
        expect([id, reply.status, runOf(reply)]).toEqual(stale ? [id, 200, 1] : [id, 503, nest ? undefined : 2]);
      }
    });
  });
});
