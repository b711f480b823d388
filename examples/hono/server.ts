/**
 * Hono on Node (`@hono/node-server`) + dogpile-guard: GET responses are cached, and concurrent
 * misses for one URL run the handler once — in this process, or across every process sharing
 * REDIS_URL.
 *
 *   node --import tsx examples/hono/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 node --import tsx examples/hono/server.ts
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { dogpileGuard } from 'dogpile-guard/hono';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';

// With REDIS_URL: one cache for every process on that Redis. Without: in this process.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined;
redis?.on('error', (error) => console.error(`redis: ${error.message}`));
const cache = createCache({ redis });

// A slow "database": 200 ms per query, every query counted.
let dbQueries = 0;
async function findProduct(id: string) {
  dbQueries++;
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), pid: process.pid };
}

const app = new Hono();

// Not cached: registered before the middleware, so it never reaches it.
app.get('/stats', (c) => c.json({ dbQueries, pid: process.pid }));

// Every GET route registered after this line is cached for 30 s.
app.use(dogpileGuard({ cache, ttl: '30s' }));

app.get('/products/:id', async (c) => c.json(await findProduct(c.req.param('id'))));

// A route with a TTL of its own: a second middleware on the route would cache it twice, so the
// handler says it instead, in a header only this cache reads.
app.get('/catalog', async (c) => {
  c.header('dogpile-cache-control', 'max-age=300');
  return c.json({ products: await Promise.all(['1', '2', '3'].map(findProduct)) });
});

const server = serve({ fetch: app.fetch, port, hostname: host }, (info) => {
  console.log(`listening on http://${host}:${info.port} (cache: ${redis ? 'Redis' : 'in-process'})`);
  console.log(`try: curl -i http://${host}:${info.port}/products/42`);
});
server.on('error', async (error) => {
  console.error(`cannot listen on ${host}:${port}: ${error.message}`);
  await cache.close();
  redis?.disconnect();
  process.exit(1);
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: closing`);
  await new Promise((resolve) => server.close(resolve));
  await cache.close(); // closes only what the cache created; the Redis client is ours to close
  await redis?.quit();
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
