/**
 * Smoke tests of examples/: each one is started the way its README says (node --import tsx),
 * on the embedded default and on a throwaway Redis, with real HTTP requests; then it is
 * stopped with a signal and must exit by itself with code 0. (Type-checking is `tsc -p .`.)
 */
import { afterAll, describe, expect, test } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { countXCache, runScript, runToEnd } from './fixtures/examples-process.js';
import { killAllChildren, type NodeChild } from '../tools/child-process.js';
import { get, json, type Reply } from '../tools/http-client.js';
import { freshId } from '../tools/basics.js';

const LISTENING = /listening on http:\/\/127\.0\.0\.1:(\d+)/;

const redis = useRedis();
afterAll(async () => {
  await killAllChildren();
});

async function startServer(file: string, env: Record<string, string>): Promise<{ app: NodeChild; port: number }> {
  const app = runScript(file, [], { PORT: '0', ...env });
  const match = await app.waitFor(LISTENING);
  return { app, port: Number(match[1]) };
}

/** `n` concurrent GETs of one path, spread round-robin over `ports`. */
function herd(ports: number[], path: string, n: number, headers: Record<string, string> = {}): Promise<Reply[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => get(ports[i % ports.length]!, path, headers)));
}

/** One request ran the handler; the others got its response while it ran (or from the cache right after). */
function expectCoalesced(replies: Reply[]): void {
  const counts = countXCache(replies);
  expect(counts.MISS, JSON.stringify(counts)).toBe(1);
  expect(counts.COALESCED ?? 0, JSON.stringify(counts)).toBeGreaterThan(0);
  expect((counts.MISS ?? 0) + (counts.COALESCED ?? 0) + (counts.HIT ?? 0)).toBe(replies.length);
  const bodies = new Set(replies.map((r) => r.text));
  expect(bodies.size).toBe(1);
}

const SERVERS = [
  { name: 'express', file: 'examples/express/server.ts', signal: 'SIGTERM' },
  { name: 'fastify', file: 'examples/fastify/server.ts', signal: 'SIGINT' },
  { name: 'nest', file: 'examples/nest/server.ts', signal: 'SIGTERM' },
] as const;

describe.each(SERVERS)('examples/$name', ({ file, signal }) => {
  for (const mode of ['in-process', 'Redis'] as const) {
    test(`${mode}: MISS then HIT, a herd runs the handler once, ${signal} stops it`, async () => {
      const { app, port } = await startServer(file, mode === 'Redis' ? { REDIS_URL: redis.url } : {});
      expect(app.stdout).toContain(`(cache: ${mode})`);

      const id = freshId('p');
      const first = await get(port, `/products/${id}`);
      expect(first.status).toBe(200);
      expect(first.xCache).toBe('MISS');
      expect(json(first)).toMatchObject({ id, name: `Product ${id}` });

      // The leader stores the response after sending it: a request that arrives before the
      // store lands waits for it (COALESCED). Once one has been answered that way, the entry
      // is there, so the next request is a HIT. Neither runs the handler.
      const second = await get(port, `/products/${id}`);
      expect(['HIT', 'COALESCED']).toContain(second.xCache);
      const hit = second.xCache === 'HIT' ? second : await get(port, `/products/${id}`);
      expect(hit.xCache).toBe('HIT');
      expect(hit.headers.age).toMatch(/^\d+$/);
      expect(hit.text).toBe(first.text);
      expect(second.text).toBe(first.text);

      const replies = await herd([port], `/products/${freshId('h')}`, 12);
      expect(replies.every((r) => r.status === 200)).toBe(true);
      expectCoalesced(replies);

      const stats = await get(port, '/stats');
      expect(stats.xCache).toBeUndefined(); // not cached
      expect(json(stats).dbQueries).toBe(2); // one per product, however many requests
      if (file === 'examples/express/server.ts') {
        // the Prometheus scrape counts the same: two misses (one handler run each), the rest answered without one
        const scrape = await get(port, '/metrics');
        expect(scrape.headers['content-type']).toMatch(/^text\/plain/);
        expect(scrape.text).toContain('dogpile_guard_calls_total{outcome="miss",layer="none"} 2');
        expect(scrape.text).toMatch(/dogpile_guard_loader_duration_seconds_count\{background="false",outcome="ok"\} 2/);
      }

      expect(await app.stop(signal)).toEqual({ code: 0, signal: null });
      expect(app.stdout).toContain(`${signal}: closing`);
      expect(app.stderr).toBe('');
    });
  }
});

test('examples/express: two instances on one Redis run the handler once for a herd spread over both', async () => {
  const [a, b] = await Promise.all([
    startServer('examples/express/server.ts', { REDIS_URL: redis.url }),
    startServer('examples/express/server.ts', { REDIS_URL: redis.url }),
  ]);
  // The host is part of the key: behind a load balancer both instances see the same one.
  const headers = { host: 'shop.example.test' };
  const replies = await herd([a.port, b.port], `/products/${freshId('pair')}`, 16, headers);
  expectCoalesced(replies);
  const queries = json(await get(a.port, '/stats')).dbQueries + json(await get(b.port, '/stats')).dbQueries;
  expect(queries).toBe(1);

  const [exitA, exitB] = await Promise.all([a.app.stop('SIGTERM'), b.app.stop('SIGTERM')]);
  expect(exitA).toEqual({ code: 0, signal: null });
  expect(exitB).toEqual({ code: 0, signal: null });
});

// Scripts that run to the end: independent of each other (own keys and lock names), so they run side by side.
describe.concurrent('examples/direct', () => {
  for (const mode of ['in-process', 'Redis'] as const) {
    const env = (): Record<string, string> => (mode === 'Redis' ? { REDIS_URL: redis.url } : {});

    test(`get-or-compute.ts (${mode})`, async ({ expect }) => {
      const run = await runToEnd('examples/direct/get-or-compute.ts', [], env());
      expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
      expect(run.stdout).toContain("100 concurrent getOrCompute('rates:EUR') calls: the loader ran once, all got USD=1.08");
      expect(run.stdout).toContain('one more call: the loader has still run once (a hit)');
      expect(run.stdout).toContain("20 concurrent cacheWithoutDogpiling('page:home') calls: rendered once");
      expect(run.stdout).toMatch(/cache\.resolve\('rates:EUR'\): hit, computed \d+ ms ago/);
      expect(run.stdout).toContain('10 concurrent calls to a failing loader: 10 failed with "upstream is down", the loader ran once');
    });

    test(`lock.ts (${mode})`, async ({ expect }) => {
      const run = await runToEnd('examples/direct/lock.ts', [], env());
      expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
      // The three jobs never overlap, and each acquisition has a larger fencing token.
      const events = [...run.stdout.matchAll(/job (\w) (holds the lock \(fencing token (\d+)\)|releases it)/g)];
      expect(events).toHaveLength(6);
      for (let i = 0; i < 6; i += 2) {
        expect(events[i]![2]).toMatch(/^holds/);
        expect(events[i + 1]![2]).toBe('releases it');
        expect(events[i + 1]![1]).toBe(events[i]![1]);
      }
      const tokens = events.filter((e) => e[3] !== undefined).map((e) => Number(e[3]));
      expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
      expect(new Set(tokens).size).toBe(3);
      expect(run.stdout.match(/built the report/g)).toHaveLength(1);
      expect(run.stdout.match(/another instance holds the lock, skipped/g)).toHaveLength(2);
      expect(run.stdout).toMatch(/acquired \(fencing token \d+\), owner \S+:\d+/);
      expect(run.stdout).toContain('released');
    });
  }

  test('workers.ts without Redis: each process builds the report once', async ({ expect }) => {
    const run = await runToEnd('examples/direct/workers.ts', [], { WORKERS: '2' });
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('the report was built 2 times across 2 worker processes: without REDIS_URL each process has its own cache');
  });

  test('workers.ts with Redis: the report is built once across all processes', async ({ expect }) => {
    const run = await runToEnd('examples/direct/workers.ts', [], { WORKERS: '3', REDIS_URL: redis.url });
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('the report was built once across 3 worker processes (shared through Redis)');
    const builtBy = new Set([...run.stdout.matchAll(/built by (\d+)/g)].map((m) => m[1]));
    expect(builtBy.size).toBe(1);
    expect(run.stdout.match(/^worker \d+:/gm)).toHaveLength(3);
  });
});

describe('examples/cluster', () => {
  test('without REDIS_URL it explains what it needs and exits 1', async () => {
    const run = await runToEnd('examples/cluster/server.ts', [], { PORT: '0' });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('needs a Redis');
    expect(run.stderr).toContain('REDIS_URL=redis://');
  });

  test('workers on one Redis: a herd runs the handler once across the cluster; SIGTERM stops everything', async () => {
    const { app, port } = await startServer('examples/cluster/server.ts', { REDIS_URL: redis.url, WORKERS: '2' });
    expect(app.stdout).toContain('(2 workers, cache shared through Redis)');

    const path = `/products/${freshId('c')}`;
    const replies = await herd([port], path, 30);
    expectCoalesced(replies);
    const stats = json(await get(port, '/stats')) as { requests: Record<string, number>; dbQueriesTotal: number };
    expect(stats.dbQueriesTotal).toBe(1);
    expect(Object.keys(stats.requests).length).toBeGreaterThan(1); // the herd was spread over workers

    // The herd client of the example, on a second cold URL.
    const client = await runToEnd('examples/cluster/herd.ts', [`http://127.0.0.1:${port}/products/${freshId('c')}`, '20']);
    expect(client, client.stderr).toMatchObject({ code: 0, signal: null });
    expect(client.stdout).toMatch(/X-Cache: +MISS 1, COALESCED \d+, HIT \d+/);
    expect(client.stdout).toMatch(/database queries: +1 \(by worker \d\)/);

    expect(await app.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(app.stdout).toContain('SIGTERM: stopping 2 workers');
    expect(app.stdout.match(/queried the database/g)).toHaveLength(2);
  });
});
