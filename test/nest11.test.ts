/**
 * NestJS 11 (CommonJS): two instances of a Nest 11 app compiled to CommonJS
 * (test/fixtures/nest11/app.js) `require` the built `dist/nest/index.cjs`, on one Redis; two
 * instances of another (test/fixtures/nest11/cache-manager-app.js) `require` the built
 * `dist/nest/cache-manager/index.cjs`.
 *
 * The fixture has its own package.json and package-lock.json (Nest 11); `npm ci` installs it
 * when its node_modules is missing. The package under test is copied (not linked) into its
 * node_modules/dogpile-guard, as `npm install` would put it: Node resolves a symlink to its
 * real path, and from the repository's dist/ `require('@nestjs/common')` would find the
 * repository's Nest 12 instead of the app's Nest 11. The app reports where the modules it
 * loaded came from, and the test checks that nothing came from outside the fixture.
 *
 * Needs the build (`npm run build`; `npm test` builds first).
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { freshId } from '../tools/basics.js';
import { get, json } from '../tools/http-client.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';

const execFileAsync = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const fixture = path.join(root, 'test', 'fixtures', 'nest11');
const H = { host: 'api.example.test' };

interface App {
  child: NodeChild;
  lines: string[];
  port: number;
  exited: Promise<number | null>;
}

const server = useRedis();
let redis: Redis;
let apps: App[] = [];

/** `npm ci` in the fixture when needed, then a fresh copy of the built package into its node_modules. */
async function prepareFixture(): Promise<void> {
  if (!existsSync(path.join(root, 'dist', 'nest', 'index.cjs'))) {
    throw new Error('dist/nest/index.cjs is missing: run `npm run build` first (`npm test` does)');
  }
  if (!existsSync(path.join(fixture, 'node_modules', '@nestjs', 'core', 'package.json'))) {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    await execFileAsync(npm, ['ci', '--no-audit', '--no-fund', '--prefix', fixture], { cwd: fixture, timeout: 240_000 });
  }
  const target = path.join(fixture, 'node_modules', 'dogpile-guard');
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  cpSync(path.join(root, 'package.json'), path.join(target, 'package.json'));
  cpSync(path.join(root, 'dist'), path.join(target, 'dist'), { recursive: true });
}

async function startApp(prefix: string, file = 'app.js'): Promise<App> {
  const child = new NodeChild(`the Nest 11 app ${file}`, [path.join(fixture, file), server.url, prefix], { cwd: fixture });
  const line = await child.waitFor((l) => l.startsWith('listening '), 45_000);
  return { child, lines: child.lines, port: Number(line.split(' ')[1]), exited: child.exited.then((exit) => exit.code) };
}

beforeAll(async () => {
  await prepareFixture();
  redis = server.client();
  apps = await Promise.all([startApp('nest11'), startApp('nest11')]);
}, 300_000);

afterAll(async () => {
  await killAllChildren();
  await Promise.all(apps.map((a) => a.exited));
});

const count = async (name: string, run: string) => Number((await redis.get(`count:${name}:${run}`)) ?? 0);

describe('a NestJS 11 app compiled to CommonJS, using dist/nest/index.cjs', () => {
  it('loads Nest 11 and everything else from its own node_modules', () => {
    for (const app of apps) {
      const line = app.lines.find((l) => l.startsWith('modules '));
      const report = JSON.parse(line!.slice('modules '.length)) as {
        dogpileNest: string;
        nestCommonForDogpile: string;
        nestCommonVersion: string;
        outside: string[];
      };
      expect(report.dogpileNest).toBe(path.join(fixture, 'node_modules', 'dogpile-guard', 'dist', 'nest', 'index.cjs'));
      expect(report.nestCommonForDogpile.startsWith(path.join(fixture, 'node_modules', '@nestjs', 'common') + path.sep)).toBe(true);
      expect(report.nestCommonVersion).toMatch(/^11\./);
      // `debug` (under ioredis) probes for the optional supports-color; in a real install it
      // is simply absent, here Node finds the repository's copy one directory up.
      expect(report.outside.filter((file) => !/[/\\]node_modules[/\\](supports-color|has-flag)[/\\]/.test(file))).toEqual([]);
    }
  });

  it('two instances on one Redis: 300 concurrent requests to a cold 200 ms route run the handler once', async () => {
    const run = freshId();
    const replies = await Promise.all(Array.from({ length: 300 }, (_, i) => get(apps[i % 2]!.port, `/stampede?run=${run}`, H)));
    expect(await count('stampede', run)).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(json(replies[0]!)).toMatchObject({ run, n: 1, nest: 11 });
    expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
  });

  it('caches, passes Authorization through, sends errors as Nest does, skips StreamableFile', async () => {
    const run = freshId();
    const [a, b] = apps;
    const first = await get(a!.port, `/items?run=${run}`, H);
    const second = await get(b!.port, `/items?run=${run}`, H);
    expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
    expect(second.text).toBe(first.text);

    const auth = await get(a!.port, `/me?run=${run}`, { ...H, authorization: 'Bearer alice' });
    expect(auth.xCache).toBeUndefined();
    expect(json(auth).user).toBe('Bearer alice');

    const missing = await get(a!.port, `/missing?run=${run}`, H);
    expect(missing.status).toBe(404);
    expect(json(missing)).toEqual({ statusCode: 404, message: `no item ${run}`, error: 'Not Found' });
    await get(b!.port, `/missing?run=${run}`, H);
    expect(await count('missing', run)).toBe(2);

    const f1 = await get(a!.port, `/file?run=${run}`, H);
    const f2 = await get(a!.port, `/file?run=${run}`, H);
    expect([f1.text, f2.text]).toEqual([`file ${run} #1`, `file ${run} #2`]);
  });

  it('injects the DogpileCache by its type and caches @Cached provider methods', async () => {
    const run = freshId();
    const d1 = json(await get(apps[0]!.port, `/direct?run=${run}`, H));
    const d2 = json(await get(apps[1]!.port, `/direct?run=${run}`, H));
    expect(d1).toEqual({ run, n: 1 });
    expect(d2).toEqual(d1);

    const sku = freshId('sku');
    const quotes = await Promise.all(Array.from({ length: 10 }, (_, i) => get(apps[i % 2]!.port, `/quote?sku=${sku}`, H)));
    expect(quotes.map((r) => json(r))).toEqual(Array.from({ length: 10 }, () => ({ sku, n: 1 })));
  });

  it('a closed app exits by itself', async () => {
    for (const app of apps) app.child.write('close\n');
    const codes = await Promise.all(
      apps.map(async (app) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          return await Promise.race([app.exited, new Promise<'alive'>((r) => (timer = setTimeout(() => r('alive'), 20_000)))]);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    expect(codes).toEqual([0, 0]);
    for (const app of apps) expect(app.lines).toContain('closed');
  }, 40_000);
});

describe('a NestJS 11 app written for @nestjs/cache-manager, using dist/nest/cache-manager/index.cjs', () => {
  let cmApps: App[] = [];
  beforeAll(async () => {
    cmApps = await Promise.all([startApp('nest11-cm', 'cache-manager-app.js'), startApp('nest11-cm', 'cache-manager-app.js')]);
  }, 90_000);
  afterAll(async () => {
    for (const app of cmApps) app.child.kill();
    await Promise.all(cmApps.map((a) => a.exited));
  });

  it('loads the entry from its node_modules on Nest 11', () => {
    for (const app of cmApps) {
      const [, file, , version] = app.lines.find((l) => l.startsWith('cache-manager '))!.split(' ');
      expect(file).toBe(path.join(fixture, 'node_modules', 'dogpile-guard', 'dist', 'nest', 'cache-manager', 'index.cjs'));
      expect(version).toMatch(/^11\./);
    }
  });

  it('two instances: 200 cold requests through the global CacheInterceptor run the handler once; 100 wrap() calls run fn once', async () => {
    const run = freshId();
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => get(cmApps[i % 2]!.port, `/cm/stampede?run=${run}`)));
    expect(await count('cm-stampede', run)).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(json(replies[0]!)).toEqual({ run, n: 1, nest: 11 });
    const wraps = await Promise.all(Array.from({ length: 100 }, (_, i) => get(cmApps[i % 2]!.port, `/cm/wrap?run=${run}`)));
    expect(await count('cm-wrap', run)).toBe(1);
    expect(wraps.map((r) => json(r))).toEqual(Array.from({ length: 100 }, () => ({ run, n: 1 })));
  });
});
