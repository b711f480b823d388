/**
 * examples/nextjs built once, as its README says (`next build` with no Redis), then started three
 * times (`next start`, three processes on one throwaway Redis, REDIS_URL set), with
 * dogpile-guard/next as Next's `cacheHandler` and `cacheHandlers`:
 * - its route handler (`export const GET = withDogpile(...)`): a burst runs it once;
 * - an ISR page with `revalidate = 1` under steady load across the three: about one render per
 *   second fleet-wide (renders counted by the page in Redis), where each process alone would render
 *   about once a second;
 * - a path never built, 60 concurrent requests across the three: one render;
 * - a `'use cache'` function with a 1 s revalidation under load: about one run per second fleet-wide;
 * - `revalidateTag` in a route handler, and `updateTag` in a server action, of one process: the
 *   other two serve the new content on their next request;
 * - Redis stopped mid-run: every request answered, none waiting for `waitTimeout`; Redis started
 *   again: a burst on a new path renders it once.
 * The example imports the package's build, so dist/ is built first when it is older than src/.
 * Skipped, with a message, only when `next` is not installed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { freePort } from '../tools/redis-server.js';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { countXCache } from './fixtures/examples-process.js';
import { killAllChildren, NodeChild, root } from '../tools/child-process.js';
import { buildIsStale } from '../tools/built-package.js';
import { fetchReply, get, json, type Reply } from '../tools/http-client.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { monotonicNow } from '../src/shared/clock.js';
import { CACHE_DEFAULTS } from '../src/core/options.js';

const nextBin = path.join(root, 'node_modules', 'next', 'dist', 'bin', 'next');
const installed = existsSync(nextBin);
if (!installed) console.warn('test/nextjs-example.test.ts: skipped, `next` is not installed (npm ci installs it as a devDependency)');

const redis = useRedis();
const example = path.join(root, 'examples', 'nextjs');
const apps: NodeChild[] = [];
let ports: number[] = [];

/** The directory Turbopack may read from: the repository, or (node_modules a link elsewhere, as in a git worktree) the nearest directory holding both. */
function workspaceRoot(): string {
  const modules = realpathSync(path.join(root, 'node_modules'));
  let dir = root;
  while (!modules.startsWith(dir + path.sep) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

/** The renders (or runs) the example counted in Redis under `name`. */
async function renders(name: string): Promise<number> {
  return Number((await redis.client().get(`example:renders:${name}`)) ?? 0);
}

/** Requests `path` from the three processes in turn, `perProcess` clients each, back to back for `ms`; every reply. */
async function load(target: string, ms: number, perProcess = 2): Promise<Reply[]> {
  const replies: Reply[] = [];
  const end = monotonicNow() + ms;
  await Promise.all(
    ports.flatMap((port) =>
      Array.from({ length: perProcess }, async () => {
        while (monotonicNow() < end) replies.push(await get(port, target));
      }),
    ),
  );
  return replies;
}

/** `n` concurrent requests for `target`, spread over the three processes. */
function burst(target: string, n: number): Promise<Reply[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => get(ports[i % ports.length]!, target)));
}

describe.skipIf(!installed)('examples/nextjs', () => {
  beforeAll(async () => {
    if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
    const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NO_COLOR: '1', EXAMPLE_WORKSPACE_ROOT: workspaceRoot() };
    delete env.REDIS_URL;
    // Built with no Redis: the handlers answer as an empty cache in this process.
    execFileSync(process.execPath, [nextBin, 'build', example], { cwd: root, env, stdio: 'pipe' });
    ports = [await freePort(), await freePort(), await freePort()];
    for (const port of ports) {
      apps.push(new NodeChild('next', [nextBin, 'start', example, '-p', String(port), '-H', '127.0.0.1'], { env: { ...env, REDIS_URL: redis.url }, stdin: 'ignore' }));
    }
    for (const port of ports) await waitUntil('next start answers', async () => (await get(port, '/stats').catch(() => undefined))?.status === 200, 60_000, 200);
  }, 240_000);

  afterAll(async () => {
    for (const app of apps) await app.stop('SIGTERM');
    await killAllChildren();
  });

  it('a burst against the route handler runs it once; every client gets the same body', async () => {
    const port = ports[0]!;
    const before = json(await get(port, '/stats')) as { dbQueries: number; cache: string };
    expect(before.cache).toBe('Redis');
    const id = freshId('n');
    const replies = await Promise.all(Array.from({ length: 20 }, () => get(port, `/products/${id}`)));
    for (const r of replies) expect(r.status).toBe(200);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(json(replies[0]!)).toMatchObject({ id, name: `Product ${id}` });
    expect(countXCache(replies).MISS).toBe(1);
    const after = json(await get(port, '/stats')) as { dbQueries: number };
    expect(after.dbQueries - before.dbQueries).toBe(1);
    const hit = await get(port, `/products/${id}`);
    expect(hit.xCache).toBe('HIT');
    expect(hit.text).toBe(replies[0]!.text);
  });

  it('an ISR page (revalidate = 1) under load across three processes: about one render per second fleet-wide', async () => {
    await burst('/isr', 3);
    const before = await renders('isr');
    const started = monotonicNow();
    const replies = await load('/isr', 8000);
    const seconds = (monotonicNow() - started) / 1000;
    const rendered = (await renders('isr')) - before;
    for (const r of replies) expect(r.status).toBe(200);
    console.log(`ISR: ${replies.length} requests over ${seconds.toFixed(1)} s, ${rendered} renders`);
    // Each process regenerating on its own would render about once a second each (3 per second).
    expect(rendered).toBeGreaterThan(0);
    expect(rendered).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  }, 60_000);

  it('a path never built, 60 concurrent requests across the three processes: one render', async () => {
    const slug = freshId('item');
    const replies = await burst(`/items/${slug}`, 60);
    for (const r of replies) expect(r.status).toBe(200);
    for (const r of replies) expect(r.text).toContain(`item ${slug}, render 1,`);
    expect(await renders(`item:${slug}`)).toBe(1);
  }, 60_000);

  it("a 'use cache' function (revalidate 1 s) under load: about one run per second fleet-wide", async () => {
    await burst('/prices', 3);
    const before = await renders('prices');
    const started = monotonicNow();
    const replies = await load('/prices', 8000);
    const seconds = (monotonicNow() - started) / 1000;
    const runs = (await renders('prices')) - before;
    for (const r of replies) expect(r.status).toBe(200);
    for (const r of replies) expect(r.text).toContain('USD 1.08'); // the Map read back
    console.log(`'use cache': ${replies.length} requests over ${seconds.toFixed(1)} s, ${runs} runs`);
    expect(runs).toBeGreaterThan(0);
    expect(runs).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  }, 60_000);

  it('revalidateTag in one process: the other two serve the new content on their next request', async () => {
    const c = redis.client();
    await c.set('example:version:catalog', 'A');
    await c.del('example:renders:catalog');
    for (const port of ports) expect((await get(port, '/catalog')).text).toContain('catalog version ');
    const version = (r: Reply) => /catalog version (\w+)/.exec(r.text)?.[1];
    const cached = version(await get(ports[1]!, '/catalog'));
    await c.set('example:version:catalog', freshId('v').replace(/\W/g, ''));
    const changed = await c.get('example:version:catalog');
    // Not revalidated yet: still the cached value.
    expect(version(await get(ports[2]!, '/catalog'))).toBe(cached);
    const answer = await fetchReply(ports[0]!, '/api/revalidate?tag=catalog', { method: 'POST' });
    expect(answer.status).toBe(200);
    expect(version(await get(ports[1]!, '/catalog'))).toBe(changed);
    expect(version(await get(ports[2]!, '/catalog'))).toBe(changed);
  }, 60_000);

  it("updateTag from a server action (the page's form, posted as a browser without JavaScript does) in one process: the other two serve the new content on their next request", async () => {
    const c = redis.client();
    const version = (text: string) => /catalog version (\w+)/.exec(text)?.[1];
    const page = await get(ports[0]!, '/catalog');
    const cached = version(page.text);
    expect(cached).toBeDefined();
    const action = /name="(\$ACTION_ID_[0-9a-f]+)"/.exec(page.text)?.[1];
    expect(action, 'the form names its server action').toBeDefined();
    await c.set('example:version:catalog', freshId('u').replace(/\W/g, ''));
    const changed = await c.get('example:version:catalog');
    expect(version((await get(ports[1]!, '/catalog')).text)).toBe(cached);
    const form = new FormData();
    form.set(action!, '');
    const posted = await fetch(`http://127.0.0.1:${ports[0]}/catalog`, { method: 'POST', body: form, redirect: 'manual' });
    expect(posted.status).toBeLessThan(400);
    await posted.arrayBuffer();
    expect(version((await get(ports[1]!, '/catalog')).text)).toBe(changed);
    expect(version((await get(ports[2]!, '/catalog')).text)).toBe(changed);
  }, 60_000);

  it('Redis stopped mid-run: every request answered without waiting for waitTimeout; started again: a new path renders once', async () => {
    const during = load('/isr', 6000, 1);
    await sleep(1000);
    await redis.kill();
    await sleep(2500);
    await redis.start();
    const replies = await during;
    for (const r of replies) expect(r.status).toBe(200);
    const slowest = Math.max(...replies.map((r) => r.ms));
    console.log(`Redis down mid-run: ${replies.length} requests, slowest ${slowest.toFixed(0)} ms`);
    expect(slowest).toBeLessThan(CACHE_DEFAULTS.waitTimeout);
    // Coalescing again once every process is back on Redis.
    await waitUntil(
      'a burst on a new path renders once',
      async () => {
        const slug = freshId('back');
        const answers = await burst(`/items/${slug}`, 30);
        return answers.every((r) => r.status === 200) && (await renders(`item:${slug}`)) === 1;
      },
      30_000,
      500,
    );
  }, 90_000);
});
