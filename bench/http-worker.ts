/**
 * Child process of `bench/http.bench.ts`: one Express or Fastify app serving the benchmarked
 * routes with one contender's caching.
 *
 *   node --import tsx bench/http-worker.ts <contender> <redis url> <handler ms>
 *
 * Contenders: express-bare, express-apicache, express-dogpile, express-dogpile-redis,
 * express-dogpile-redis-l1, fastify-bare, fastify-dogpile, fastify-dogpile-redis-l1
 * (`-redis`: the cache on the given Redis; otherwise in this process), and
 * fastify-dogpile-before: `dogpileGuardPlugin` imported from the module named by the
 * environment variable `BENCH_FASTIFY_PLUGIN_BEFORE` (another version of the plugin, to
 * compare the two in one run), in-process cache.
 *
 * Routes: `GET /hit` (cached; a ~1.3 kB JSON list built per call), `GET /slow?id=` (cached; the
 * handler counts its run with `INCR runs:<id>` and takes <handler ms>), `GET /ping` and
 * `GET /cpu` (uncached: CPU time this process has used, in µs). Prints `listening <port>`;
 * closes everything and exits when stdin ends.
 */
import { listenNode, listenUntilStdinEnds } from './lib/app-process.js';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import express, { type RequestHandler } from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { createCache, type DogpileCache } from '../src/index.js';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';

const [contender, redisUrl, handlerMs] = process.argv.slice(2);
if (!contender || !redisUrl || !handlerMs) throw new Error('usage: http-worker.ts <contender> <redis url> <handler ms>');
const HANDLER_MS = Number(handlerMs);
const TTL_MS = 60_000;

const redis = new Redis(redisUrl);
redis.on('error', () => {});
let cache: DogpileCache | undefined;
if (contender.includes('dogpile')) {
  cache = contender.includes('redis')
    ? createCache({ redis, prefix: `bench-${contender}`, l1: contender.endsWith('-l1') })
    : createCache();
}

/** The /hit payload: a small product list, built on every call as a real handler would. */
function catalogue() {
  return {
    page: 1,
    items: Array.from({ length: 12 }, (_, i) => ({ id: i + 1, name: `product ${i + 1}`, price: 1000 + i * 75, currency: 'EUR', tags: ['a', 'b'] })),
  };
}

async function slow(id: string) {
  await redis.incr(`runs:${id}`);
  await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  return { id, name: `product ${id}`, price: 1999, description: 'computed once, served to everyone' };
}

const cpu = () => {
  const { user, system } = process.cpuUsage();
  return { micros: user + system, user, system };
};

let close: () => Promise<void>;
let port: number;

if (contender.startsWith('express')) {
  const app = express();
  let guard: RequestHandler = (_req, _res, next) => next();
  if (contender === 'express-apicache') {
    const apicache = createRequire(import.meta.url)('apicache') as { middleware: (duration: string) => RequestHandler };
    guard = apicache.middleware('1 minute');
  } else if (cache) {
    guard = dogpileGuard({ cache, ttl: TTL_MS });
  }
  app.get('/hit', guard, (_req, res) => {
    res.json(catalogue());
  });
  app.get('/slow', guard, async (req, res) => {
    res.json(await slow(String(req.query.id)));
  });
  app.get('/ping', (_req, res) => {
    res.send('pong');
  });
  app.get('/cpu', (_req, res) => {
    res.json(cpu());
  });
  ({ port, close } = await listenNode(app.listen(0, '127.0.0.1')));
} else {
  const app = Fastify({ logger: false });
  let plugin = dogpileGuardPlugin;
  if (contender === 'fastify-dogpile-before') {
    const before = process.env.BENCH_FASTIFY_PLUGIN_BEFORE;
    if (!before) throw new Error('fastify-dogpile-before needs BENCH_FASTIFY_PLUGIN_BEFORE=<module path>');
    plugin = ((await import(pathToFileURL(path.resolve(before)).href)) as { dogpileGuardPlugin: typeof dogpileGuardPlugin }).dogpileGuardPlugin;
  }
  if (cache) await app.register(plugin, { cache, ttl: TTL_MS });
  app.get('/hit', async () => catalogue());
  app.get<{ Querystring: { id: string } }>('/slow', async (req) => slow(req.query.id));
  app.get('/ping', { config: { dogpile: false } }, async () => 'pong');
  app.get('/cpu', { config: { dogpile: false } }, async () => cpu());
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as AddressInfo).port;
  close = () => app.close();
}

listenUntilStdinEnds(port, async () => {
  await close();
  await cache?.close();
  await redis.quit().catch(() => redis.disconnect());
});
