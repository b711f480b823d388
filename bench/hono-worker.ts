/**
 * Child process of `bench/hono.bench.ts`: one Hono app on `@hono/node-server`.
 *
 *   node --import tsx bench/hono-worker.ts <contender> <redis url> <handler ms>
 *
 * Contenders: hono-bare (no cache; `/hit` builds its JSON per call), hono-bytes (no cache;
 * `/hit` sends bytes prepared once, the body a cache hit sends), hono-same (the body and the
 * header fields of a hit), hono-map (a middleware answering from a `Map` with the bytes and
 * fields of a hit, no cache), hono-dogpile (the middleware, in-process cache),
 * hono-dogpile-redis[-l1] (on the given Redis, with `l1`).
 *
 * Routes: `GET /hit`, `GET /slow?id=` (counts its run with `INCR runs:<id>`, takes
 * <handler ms>), `GET /ping` and `GET /cpu` (never cached). Prints `listening <port>`; closes
 * everything and exits when stdin ends.
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { createCache, type DogpileCache } from '../src/index.js';
import { dogpileGuard } from '../src/hono/index.js';

const [contender, redisUrl, handlerMs] = process.argv.slice(2);
if (!contender || !redisUrl || !handlerMs) throw new Error('usage: hono-worker.ts <contender> <redis url> <handler ms>');
const HANDLER_MS = Number(handlerMs);

const redis = new Redis(redisUrl);
redis.on('error', () => {});
let cache: DogpileCache | undefined;
if (contender.includes('dogpile')) {
  cache = contender.includes('redis') ? createCache({ redis, prefix: `bench-${contender}`, l1: contender.endsWith('-l1') }) : createCache();
}

/** The /hit payload: a small product list, built on every call as a real handler would. */
function catalogue() {
  return {
    page: 1,
    items: Array.from({ length: 12 }, (_, i) => ({ id: i + 1, name: `product ${i + 1}`, price: 1000 + i * 75, currency: 'EUR', tags: ['a', 'b'] })),
  };
}
const catalogueBytes = new TextEncoder().encode(JSON.stringify(catalogue()));
/** The header fields a hit sends besides `content-type` and `content-length` (Node adds `Date` to the others'). */
const HIT_FIELDS = { 'x-cache': 'HIT', age: '0', 'cache-status': 'dogpile-guard; hit; ttl=59' };

const app = new Hono();
app.get('/ping', (c) => c.text('pong'));
app.get('/cpu', (c) => {
  const { user, system } = process.cpuUsage();
  return c.json({ micros: user + system, user, system });
});
if (cache) app.use(dogpileGuard({ cache, ttl: 60_000 }));
if (contender === 'hono-map') {
  // A middleware answering from a Map with the bytes and header fields of a hit, no cache.
  const prepared = new Map([['/hit', catalogueBytes]]);
  app.use(async (c, next) => {
    const body = prepared.get(c.req.path);
    if (body === undefined) return next();
    c.res = new Response(body, { status: 200, headers: { 'content-type': 'application/json', 'content-length': String(body.byteLength), ...HIT_FIELDS } });
  });
}
if (contender === 'hono-same') app.get('/hit', (c) => c.body(catalogueBytes, 200, { 'content-type': 'application/json', ...HIT_FIELDS }));
else if (contender === 'hono-bytes' || contender === 'hono-map') app.get('/hit', (c) => c.body(catalogueBytes, 200, { 'content-type': 'application/json' }));
else app.get('/hit', (c) => c.json(catalogue()));
app.get('/slow', async (c) => {
  const id = c.req.query('id') ?? '';
  await redis.incr(`runs:${id}`);
  await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  return c.json({ id, name: `product ${id}`, price: 1999, description: 'computed once, served to everyone' });
});

const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`listening ${info.port}\n`);
});

process.stdin.resume();
process.stdin.on('end', () => {
  const s = server as import('node:http').Server;
  s.close();
  s.closeAllConnections();
  void Promise.resolve(cache?.close()).then(() => redis.quit()).then(() => process.exit(0));
});
