/**
 * dogpile-guard/next on Next.js 15 (the latest 15.x from the registry), installed as a user
 * installs it: the packed tarball, `next@^15.5.0`, React 19 and ioredis into a fresh project in a
 * temporary directory, with the App Router app of test/fixtures/next15 (`createCacheHandler` as
 * `cacheHandler`, `createUseCacheHandler` as `experimental.cacheHandlers`). `next build` with no
 * Redis, then two `next start` processes on one throwaway Redis:
 * - an ISR page with `revalidate = 1` under steady load across the two: about one render per
 *   second for both together (renders counted by the page in Redis), where each process alone
 *   would render about once a second;
 * - `revalidateTag` in a route handler of one process: the other serves the new `unstable_cache`
 *   data on its next request;
 * - a `'use cache'` function with a 1 s revalidation under the same load: about one run per
 *   second for both together.
 * The install uses `--prefer-offline` (npm's cache after the first run).
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, NodeChild, root } from '../tools/child-process.js';
import { buildIsStale } from '../tools/built-package.js';
import { fetchReply, get, type Reply } from '../tools/http-client.js';
import { freshId, waitUntil } from '../tools/basics.js';
import { monotonicNow } from '../src/shared/clock.js';
import { freePort } from '../tools/redis-server.js';

const run = promisify(execFile);
const redis = useRedis();
const apps: NodeChild[] = [];
let ports: number[] = [];
let scratch: string;
let project: string;


/** The renders (or runs) the app counted in Redis under `name`. */
async function renders(name: string): Promise<number> {
  return Number((await redis.client().get(`next15:renders:${name}`)) ?? 0);
}

/** Requests `target` from both processes, 2 clients each, back to back for `ms`; every reply and the seconds taken. */
async function load(target: string, ms: number): Promise<{ replies: Reply[]; seconds: number }> {
  const replies: Reply[] = [];
  const started = monotonicNow();
  const end = started + ms;
  await Promise.all(
    ports.flatMap((port) =>
      [0, 1].map(async () => {
        while (monotonicNow() < end) replies.push(await get(port, target));
      }),
    ),
  );
  return { replies, seconds: (monotonicNow() - started) / 1000 };
}

describe('dogpile-guard/next on Next.js 15', () => {
  beforeAll(async () => {
    if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
    scratch = mkdtempSync(path.join(os.tmpdir(), 'dogpile-next15-'));
    const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', scratch], { cwd: root }).toString().trim().split('\n').pop()!;
    project = path.join(scratch, 'app');
    cpSync(path.join(root, 'test', 'fixtures', 'next15'), project, { recursive: true });
    const dependencies = { 'dogpile-guard': `file:${path.join(scratch, packed)}`, next: '^15.5.0', react: '^19.1.0', 'react-dom': '^19.1.0', ioredis: '^5.0.0' };
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'next15-app', version: '1.0.0', private: true, dependencies }, null, 2));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel', 'error'], { cwd: project, timeout: 150_000, killSignal: 'SIGKILL' });
    const version = (JSON.parse(readFileSync(path.join(project, 'node_modules', 'next', 'package.json'), 'utf8')) as { version: string }).version;
    console.log(`next ${version}`);
    expect(version).toMatch(/^15\.(5|[6-9]|\d{2,})\./);
    const nextBin = path.join(project, 'node_modules', 'next', 'dist', 'bin', 'next');
    const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NO_COLOR: '1' };
    delete env.REDIS_URL;
    // Built with no Redis: the handlers answer as an empty cache in the build's processes.
    await run(process.execPath, [nextBin, 'build'], { cwd: project, env, timeout: 240_000, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 });
    ports = [await freePort(), await freePort()];
    for (const port of ports) {
      apps.push(new NodeChild('next15', [nextBin, 'start', '-p', String(port), '-H', '127.0.0.1'], { cwd: project, env: { ...env, REDIS_URL: redis.url }, stdin: 'ignore' }));
    }
    for (const port of ports) await waitUntil('next start answers', async () => (await get(port, '/isr').catch(() => undefined))?.status === 200, 60_000, 200);
  }, 420_000);

  afterAll(async () => {
    for (const app of apps) await app.stop('SIGTERM');
    await killAllChildren();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('an ISR page (revalidate = 1) under load across two processes: about one render per second for both', async () => {
    await Promise.all(ports.map((port) => get(port, '/isr')));
    const before = await renders('isr');
    const { replies, seconds } = await load('/isr', 8000);
    const rendered = (await renders('isr')) - before;
    for (const r of replies) expect(r.status).toBe(200);
    for (const r of replies) expect(r.text).toMatch(/render \d+ by \d+/);
    console.log(`ISR on Next 15: ${replies.length} requests over ${seconds.toFixed(1)} s, ${rendered} renders`);
    // Each process regenerating on its own would render about once a second each (2 per second).
    expect(rendered).toBeGreaterThan(0);
    expect(rendered).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  }, 60_000);

  it('revalidateTag in one process: the other serves the new unstable_cache data on its next request', async () => {
    const c = redis.client();
    const version = (r: Reply) => /catalog version (\w+)/.exec(r.text)?.[1];
    await c.set('next15:version:catalog', 'A');
    await fetchReply(ports[0]!, '/api/revalidate?tag=catalog', { method: 'POST' });
    expect(version(await get(ports[0]!, '/catalog'))).toBe('A');
    expect(version(await get(ports[1]!, '/catalog'))).toBe('A');
    const changed = freshId('v').replace(/\W/g, '');
    await c.set('next15:version:catalog', changed);
    // Not revalidated yet: both still serve the cached data.
    expect(version(await get(ports[1]!, '/catalog'))).toBe('A');
    expect(version(await get(ports[0]!, '/catalog'))).toBe('A');
    const answer = await fetchReply(ports[0]!, '/api/revalidate?tag=catalog', { method: 'POST' });
    expect(answer.status).toBe(200);
    expect(version(await get(ports[1]!, '/catalog'))).toBe(changed);
    expect(version(await get(ports[0]!, '/catalog'))).toBe(changed);
  }, 60_000);

  it("a 'use cache' function (revalidate 1 s, experimental.cacheHandlers) under load: about one run per second for both", async () => {
    await Promise.all(ports.map((port) => get(port, '/prices')));
    const before = await renders('prices');
    const { replies, seconds } = await load('/prices', 8000);
    const runs = (await renders('prices')) - before;
    for (const r of replies) expect(r.status).toBe(200);
    for (const r of replies) expect(r.text).toContain('USD 1.08'); // the Map read back
    console.log(`'use cache' on Next 15: ${replies.length} requests over ${seconds.toFixed(1)} s, ${runs} runs`);
    expect(runs).toBeGreaterThan(0);
    expect(runs).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  }, 60_000);
});
