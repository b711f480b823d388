/**
 * The published package: `npm pack` output installed into a separate project can be
 * `require`d and `import`ed through every entry of the exports map, with types.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildIsStale } from '../tools/built-package.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let project: string;

beforeAll(() => {
  if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
  project = mkdtempSync(path.join(os.tmpdir(), 'dogpile-consumer-'));
  const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', project], { cwd: root }).toString().trim().split('\n').pop()!;
  const target = path.join(project, 'node_modules', 'dogpile-guard');
  mkdirSync(target, { recursive: true });
  execFileSync('tar', ['-xzf', path.join(project, packed), '-C', target, '--strip-components=1']);
  // The consumer's other dependencies come from this repository's install (no network needed).
  for (const dep of ['lru-cache', 'fastify-plugin', 'ioredis', 'express', 'fastify', '@nestjs', 'rxjs', 'reflect-metadata', '@types', 'typescript', 'undici-types', '@opentelemetry', 'prom-client', 'msgpackr', 'hono', 'koa']) {
    const from = path.join(root, 'node_modules', dep);
    if (existsSync(from)) symlinkSync(from, path.join(project, 'node_modules', dep));
  }
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
}, 120_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships only the build and the README', () => {
    const files = execFileSync('tar', ['-tzf', path.join(project, readdir(project).find((f) => f.endsWith('.tgz'))!)]).toString().split('\n').filter(Boolean);
    expect(files).toContain('package/dist/index.js');
    expect(files).toContain('package/dist/index.cjs');
    expect(files).toContain('package/dist/index.d.ts');
    expect(files).toContain('package/README.md');
    expect(files.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);
  });

  it('can be required (CommonJS) and imported (ESM) through every entry', () => {
    const cjs = `
      const main = require('dogpile-guard');
      for (const name of ['createCache', 'getOrCompute', 'cacheWithoutDogpiling', 'setDefaultCache', 'RedisLock', 'MemoryLock', 'withLock', 'errors']) {
        if (!main[name]) throw new Error('missing ' + name);
      }
      for (const sub of ['express', 'fastify', 'nest', 'nest/cache-manager']) require('dogpile-guard/' + sub);
      if (typeof require('dogpile-guard/otel').instrumentDogpile !== 'function') throw new Error('missing instrumentDogpile');
      if (typeof require('dogpile-guard/prometheus').registerDogpileMetrics !== 'function') throw new Error('missing registerDogpileMetrics');
      if (require('dogpile-guard/msgpack').msgpackSerializer.name !== 'msgpack') throw new Error('missing msgpackSerializer');
      if (require('dogpile-guard/nest/cache-manager').CACHE_MANAGER !== 'CACHE_MANAGER') throw new Error('missing CACHE_MANAGER');
      if (typeof require('dogpile-guard/fetch').withDogpile !== 'function') throw new Error('missing withDogpile');
      if (typeof require('dogpile-guard/hono').dogpileGuard !== 'function') throw new Error('missing hono dogpileGuard');
      if (typeof require('dogpile-guard/koa').dogpileGuard !== 'function') throw new Error('missing koa dogpileGuard');
      const next = require('dogpile-guard/next');
      if (typeof next.createCacheHandler() !== 'function' || typeof next.createUseCacheHandler().getExpiration !== 'function') throw new Error('missing dogpile-guard/next');
      main.createCache().getOrCompute('k', () => 'cjs-ok', 1000).then((v) => console.log(v));
    `;
    expect(execFileSync(process.execPath, ['-e', cjs], { cwd: project }).toString().trim()).toBe('cjs-ok');
    const esm = `
      import { createCache, errors } from 'dogpile-guard';
      await import('dogpile-guard/express'); await import('dogpile-guard/fastify'); await import('dogpile-guard/nest'); await import('dogpile-guard/nest/cache-manager');
      if (!errors.LockTimeoutError) throw new Error('no errors map');
      const { instrumentDogpile } = await import('dogpile-guard/otel');
      const { registerDogpileMetrics } = await import('dogpile-guard/prometheus');
      const { msgpackSerializer } = await import('dogpile-guard/msgpack');
      if (!(msgpackSerializer.deserialize(Buffer.from(msgpackSerializer.serialize(new Map([['a', 1]])))) instanceof Map)) throw new Error('msgpack');
      const { withDogpile } = await import('dogpile-guard/fetch');
      const { dogpileGuard: honoGuard } = await import('dogpile-guard/hono');
      const { dogpileGuard: koaGuard } = await import('dogpile-guard/koa');
      const { createCacheHandler, createUseCacheHandler } = await import('dogpile-guard/next');
      const NextHandler = createCacheHandler();
      await new NextHandler({}).set('/p', { kind: 'APP_ROUTE', body: Buffer.from('x'), status: 200, headers: {} }, { cacheControl: { revalidate: 60 } });
      if (!Buffer.isBuffer((await new NextHandler({}).get('/p', { kind: 'APP_ROUTE' })).value.body)) throw new Error('next handler');
      await NextHandler.close();
      await createUseCacheHandler().close();
      const fetchCache = createCache();
      const wrapped = withDogpile(async () => new Response('esm-fetch'), { cache: fetchCache });
      const replies = await Promise.all([1, 2].map(() => wrapped(new Request('http://shop.example/x'))));
      if ((await replies[0].text()) !== 'esm-fetch' || replies[1].headers.get('x-cache') === null) throw new Error('withDogpile');
      await fetchCache.close();
      if (typeof honoGuard() !== 'function' || typeof koaGuard() !== 'function') throw new Error('middleware');
      instrumentDogpile()();
      registerDogpileMetrics().dispose();
      console.log(await createCache().getOrCompute('k', () => 'esm-ok', 1000));
    `;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', esm], { cwd: project }).toString().trim()).toBe('esm-ok');
  });

  it("loads the one-line Next.js handler files as Next does (import() of the file's URL, mod.default || mod): .mjs, and .js in a CommonJS project", () => {
    writeFileSync(path.join(project, 'cache-handler.mjs'), "import { createCacheHandler } from 'dogpile-guard/next';\nexport default createCacheHandler({ redis: process.env.REDIS_URL });\n");
    writeFileSync(path.join(project, 'cache-handler.js'), "const { createCacheHandler } = require('dogpile-guard/next');\nmodule.exports = createCacheHandler({ redis: process.env.REDIS_URL });\n");
    writeFileSync(path.join(project, 'use-cache-handler.mjs'), "import { createUseCacheHandler } from 'dogpile-guard/next';\nexport default createUseCacheHandler({ redis: process.env.REDIS_URL });\n");
    const load = `
      import { pathToFileURL } from 'node:url';
      const loaded = async (file) => { const mod = await import(pathToFileURL(process.cwd() + '/' + file).href); return mod.default || mod; };
      for (const file of ['cache-handler.mjs', 'cache-handler.js']) {
        const Handler = await loaded(file);
        const handler = new Handler({ revalidatedTags: [] });
        await handler.set('/p', { kind: 'APP_ROUTE', body: Buffer.from(file), status: 200, headers: {} }, { cacheControl: { revalidate: 60 } });
        if ((await handler.get('/p', { kind: 'APP_ROUTE' })).value.body.toString() !== file) throw new Error(file);
        await Handler.close();
      }
      const useCache = await loaded('use-cache-handler.mjs');
      if ((await useCache.getExpiration(['t'])) !== 0 || (await useCache.get('k', [])) !== undefined) throw new Error('use-cache-handler.mjs');
      await useCache.close();
      console.log('handlers-ok');
    `;
    const env = { ...process.env };
    delete env.REDIS_URL;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', load], { cwd: project, env }).toString().trim()).toBe('handlers-ok');
  });

  it('type-checks a consumer under NodeNext (ESM and CommonJS) resolution', () => {
    const source = `
      import { createCache, RedisLock, LockTimeoutError, type DogpileCache, type CacheResult } from 'dogpile-guard';
      const cache: DogpileCache = createCache({ lockTtl: '5s' });
      const n: Promise<number> = cache.getOrCompute('k', async ({ key, signal }) => key.length + (signal.aborted ? 1 : 0), '1m');
      const r: Promise<CacheResult<string>> = cache.resolve('k', () => 'x', { ttl: 1000 });
      const e: string = new LockTimeoutError('x').code;
      import { instrumentDogpile, type GetOrComputeTrace } from 'dogpile-guard/otel';
      import { registerDogpileMetrics, type DogpileMetrics } from 'dogpile-guard/prometheus';
      import { withDogpile, type WithDogpileOptions } from 'dogpile-guard/fetch';
      import { dogpileGuard as honoGuard } from 'dogpile-guard/hono';
      import { createCacheHandler, createUseCacheHandler, type NextUseCacheHandler } from 'dogpile-guard/next';
      const NextHandler = createCacheHandler({ redis: process.env.REDIS_URL, prefix: 'next' });
      const nextHandler = new NextHandler({});
      const useCache: NextUseCacheHandler = createUseCacheHandler({ l1: true });
      const fetchOptions: WithDogpileOptions = { ttl: '30s', key: (request: Request) => new URL(request.url).pathname };
      const route: (request: Request, ctx: { params: Promise<{ id: string }> }) => Promise<Response> = withDogpile(async (_request: Request, ctx: { params: Promise<{ id: string }> }) => new Response((await ctx.params).id), fetchOptions);
      const honoMiddleware = honoGuard({ skip: (c) => c.req.path === '/health' });
      const stop: () => void = instrumentDogpile({ keyGroup: (key: string) => key.split(':')[0]! });
      const metrics: DogpileMetrics = registerDogpileMetrics({ prefix: 'app_' });
      const trace: GetOrComputeTrace = { key: 'k', outcome: 'stale', layer: 'l1', degraded: false };
      export { n, r, e, RedisLock, stop, metrics, trace, route, honoMiddleware, nextHandler, useCache };
    `;
    writeFileSync(path.join(project, 'consumer.mts'), source);
    writeFileSync(path.join(project, 'consumer.cts'), source.replace(/export \{[^}]*\};/, 'export = { n, r, e, RedisLock, stop, metrics, trace, route, honoMiddleware, nextHandler, useCache };'));
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, types: ['node'], skipLibCheck: false, lib: ['ES2023', 'ESNext.Disposable', 'DOM'] }, files: ['consumer.mts', 'consumer.cts'] }),
    );
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    let output = '';
    try {
      output = execFileSync(process.execPath, [tsc, '-p', project], { cwd: project }).toString();
    } catch (err) {
      output = String((err as { stdout?: Buffer }).stdout ?? err);
    }
    expect(output).toBe('');
  });
});


function readdir(dir: string): string[] {
  return execFileSync('ls', [dir]).toString().split('\n').filter(Boolean);
}
