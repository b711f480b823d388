/**
 * Koa + dogpile-guard: GET responses are cached, and concurrent misses for one URL run the
 * downstream middleware once — in this process, or across every process sharing REDIS_URL.
 *
 *   node --import tsx examples/koa/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 node --import tsx examples/koa/server.ts
 */
import Koa from 'koa';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { dogpileGuard } from 'dogpile-guard/koa';

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

const app = new Koa();

// Every GET is cached for 30 s, except /stats (skip).
app.use(dogpileGuard({ cache, ttl: '30s', skip: (ctx) => ctx.path === '/stats' }));

app.use(async (ctx) => {
  const product = /^\/products\/([^/]+)$/.exec(ctx.path);
  if (product) ctx.body = await findProduct(decodeURIComponent(product[1]!)); // an object: sent and stored as JSON
  else if (ctx.path === '/stats') ctx.body = { dbQueries, pid: process.pid };
});

const server = app.listen(port, host);
server.once('listening', () => {
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  console.log(`listening on http://${host}:${actual} (cache: ${redis ? 'Redis' : 'in-process'})`);
  console.log(`try: curl -i http://${host}:${actual}/products/42`);
});
server.once('error', async (error) => {
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
