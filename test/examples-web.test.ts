/**
 * Smoke tests of the web-standard examples: examples/hono and examples/koa (node --import tsx),
 * examples/bun (`bun`) and examples/deno (`deno run`), the runtimes from the `bun` and `deno` npm
 * packages. Each is started as its README says, on the embedded default and on a throwaway Redis,
 * with real HTTP requests; then stopped with SIGTERM, and must exit by itself with code 0.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { countXCache, runScript } from './fixtures/examples-process.js';
import { killAllChildren, NodeChild, npxBinary } from '../tools/child-process.js';
import { get, json, type Reply } from '../tools/http-client.js';
import { freshId } from '../tools/basics.js';

const LISTENING = /listening on http:\/\/127\.0\.0\.1:(\d+)/;

const redis = useRedis();
const binaries: { bun?: string; deno?: string } = {};

beforeAll(() => {
  binaries.bun = npxBinary('bun');
  binaries.deno = npxBinary('deno');
}, 300_000);

afterAll(async () => {
  await killAllChildren();
});

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  delete base.REDIS_URL;
  delete base.PORT;
  return { ...base, NO_COLOR: '1', PORT: '0', ...extra };
}

const SERVERS = {
  hono: (extra: Record<string, string>) => runScript('examples/hono/server.ts', [], { PORT: '0', ...extra }),
  koa: (extra: Record<string, string>) => runScript('examples/koa/server.ts', [], { PORT: '0', ...extra }),
  bun: (extra: Record<string, string>) => new NodeChild('bun', ['examples/bun/server.ts'], { command: binaries.bun!, env: env(extra), stdin: 'ignore' }),
  deno: (extra: Record<string, string>) =>
    new NodeChild('deno', ['run', '-A', '--sloppy-imports', '--config', 'examples/deno/deno.json', 'examples/deno/server.ts'], { command: binaries.deno!, env: env(extra), stdin: 'ignore' }),
};

function expectCoalesced(replies: Reply[]): void {
  const counts = countXCache(replies);
  expect(counts.MISS, JSON.stringify(counts)).toBe(1);
  expect((counts.MISS ?? 0) + (counts.COALESCED ?? 0) + (counts.HIT ?? 0)).toBe(replies.length);
  expect(new Set(replies.map((r) => r.text)).size).toBe(1);
}

describe.each(Object.keys(SERVERS) as (keyof typeof SERVERS)[])('examples/%s', (name) => {
  for (const mode of ['in-process', 'Redis'] as const) {
    test(`${mode}: MISS then HIT, a herd runs the handler once, SIGTERM stops it`, async () => {
      const app = SERVERS[name](mode === 'Redis' ? { REDIS_URL: redis.url } : {});
      const port = Number((await app.waitFor(LISTENING, 60_000))[1]);
      expect(app.stdout).toContain(`(cache: ${mode})`);

      const id = freshId('p');
      const first = await get(port, `/products/${id}`);
      expect([first.status, first.xCache]).toEqual([200, 'MISS']);
      expect(json(first)).toMatchObject({ id, name: `Product ${id}` });
      const second = await get(port, `/products/${id}`);
      expect(['HIT', 'COALESCED']).toContain(second.xCache);
      expect(second.text).toBe(first.text);

      const herd = `/products/${freshId('h')}`;
      const replies = await Promise.all(Array.from({ length: 12 }, () => get(port, herd)));
      expectCoalesced(replies);

      const stats = await get(port, '/stats');
      expect(stats.xCache).toBeUndefined();
      expect(json(stats).dbQueries).toBe(2);

      expect(await app.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(app.stdout).toContain('SIGTERM: closing');
      expect(app.stderr, app.stderr).toBe('');
    }, 120_000);
  }
});
