/**
 * The web-standard adapters on real apps over real sockets: Hono on `@hono/node-server`, Koa,
 * a plain `fetch` handler served by Node, and a whole Hono app wrapped in `withDogpile(app.fetch)`,
 * each through the shared suite.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError } from '../src/index.js';
import { withDogpile } from '../src/fetch/index.js';
import { dogpileGuard as honoGuard } from '../src/hono/index.js';
import { dogpileGuard as koaGuard } from '../src/koa/index.js';
import { webAdapterSuite } from './support/web-suite.js';
import { WEB_FRAMEWORKS } from './fixtures/web-apps.js';
import { JsonChild, root } from '../tools/child-process.js';

for (const framework of WEB_FRAMEWORKS) webAdapterSuite(framework);

describe('bad input fails at once with an InvalidOptionError naming the option', () => {
  it.each([
    ['withDogpile', () => withDogpile(null as never)],
    ['withDogpile', () => withDogpile(async () => new Response(''), { ttl: -1 })],
    ['hono', () => honoGuard({ tgas: () => [] } as never)],
    ['koa', () => koaGuard({ maxBodySize: Number.NaN })],
  ])('%s', (_adapter, make) => {
    let caught: unknown;
    try {
      make();
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidOptionError);
    expect((caught as InvalidOptionError).option).toMatch(/^(handler|ttl|tgas|maxBodySize)$/);
  });
});

describe('withDogpile with a key function', () => {
  it('a successful write invalidates the key the function gives for its request seen as a GET', async () => {
    const cache = createCache();
    let runs = 0;
    const handler = withDogpile(
      async (request: Request) => {
        if (request.method === 'GET') runs++;
        return new Response(`${request.method} ${runs}`);
      },
      { cache, key: (request) => `${request.method}:${new URL(request.url).pathname}` },
    );
    const get = () => handler(new Request('http://shop.example/items/1'));
    expect(await (await get()).text()).toBe('GET 1');
    // From the cache: a HIT, or COALESCED when it came before the leader's store had landed.
    const hit = await get();
    expect(['HIT', 'COALESCED']).toContain(hit.headers.get('x-cache'));
    expect(await hit.text()).toBe('GET 1');
    expect(runs).toBe(1);
    expect(await (await handler(new Request('http://shop.example/items/1', { method: 'PUT', body: 'x' }))).text()).toBe('PUT 1');
    const after = await get();
    expect([after.headers.get('x-cache'), await after.text()]).toEqual(['MISS', 'GET 2']);
    await cache.close();
  });
});

describe('a body that fails mid-stream under a HEAD', () => {
  it('does not end the process: the HEAD is answered, the stream is read for the capture, and its failure is heard (fetch handler, Hono)', async () => {
    const child = new JsonChild('broken-body-head', ['--import', 'tsx', path.join(root, 'test/fixtures/broken-body-head.ts')], { cwd: root });
    try {
      await child.take('done', 60_000);
      const answers = child.seen('answered').map(({ adapter, head, get }) => ({ adapter, head, get }));
      expect(answers).toEqual([
        { adapter: 'fetch', head: 200, get: 200 },
        { adapter: 'hono', head: 200, get: 200 },
      ]);
    } finally {
      await child.dispose();
    }
  }, 90_000);
});
