/**
 * examples/nextjs built and started once, as its README says (`next build`, then `next start` on
 * a free port, with REDIS_URL on a throwaway Redis): a burst against its route handler
 * (`export const GET = withDogpile(...)`) runs the handler once. The example imports the
 * package's build, so dist/ is built first when it is older than src/. Skipped, with a message,
 * only when `next` is not installed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { countXCache } from './fixtures/examples-process.js';
import { killAllChildren, NodeChild, root } from '../tools/child-process.js';
import { get, json } from '../tools/http-client.js';
import { freshId, waitUntil } from '../tools/basics.js';

const nextBin = path.join(root, 'node_modules', 'next', 'dist', 'bin', 'next');
const installed = existsSync(nextBin);
if (!installed) console.warn('test/nextjs-example.test.ts: skipped, `next` is not installed (npm ci installs it as a devDependency)');

const redis = useRedis();
const example = path.join(root, 'examples', 'nextjs');
let app: NodeChild | undefined;
let port = 0;

/** True when dist/ is missing or older than a file under src/. */
function buildIsStale(): boolean {
  const built = path.join(root, 'dist', 'fetch', 'index.js');
  if (!existsSync(built)) return true;
  const newest = (dir: string): number =>
    Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).mtimeMs)));
  return newest(path.join(root, 'src')) > statSync(built).mtimeMs;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port: p } = server.address() as net.AddressInfo;
      server.close(() => resolve(p));
    });
  });
}

describe.skipIf(!installed)('examples/nextjs', () => {
  beforeAll(async () => {
    if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
    const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NO_COLOR: '1' };
    execFileSync(process.execPath, [nextBin, 'build', example], { cwd: root, env, stdio: 'pipe' });
    port = await freePort();
    app = new NodeChild('next', [nextBin, 'start', example, '-p', String(port), '-H', '127.0.0.1'], { env: { ...env, REDIS_URL: redis.url }, stdin: 'ignore' });
    await waitUntil('next start answers', async () => (await get(port, '/stats').catch(() => undefined))?.status === 200, 60_000, 200);
  }, 240_000);

  afterAll(async () => {
    await app?.stop('SIGTERM');
    await killAllChildren();
  });

  it('a burst against the route handler runs it once; every client gets the same body', async () => {
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
});
