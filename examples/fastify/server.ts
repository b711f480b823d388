/**
 * Fastify + dogpile-guard: GET responses are cached, and concurrent misses for one URL run
 * the handler once — in this process, or across every process sharing REDIS_URL.
 *
 *   node --import tsx examples/fastify/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 node --import tsx examples/fastify/server.ts
 */
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { dogpileGuardPlugin } from 'dogpile-guard/fastify';

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

const app = Fastify();

// Register the plugin before the routes it covers: every GET route below is cached for 30 s,
// and concurrent misses for one URL wait for the first request's response.
await app.register(dogpileGuardPlugin, { cache, ttl: '30s' });

app.get<{ Params: { id: string } }>('/products/:id', async (request) => findProduct(request.params.id));

// Per route: a TTL of its own...
app.get('/catalog', { config: { dogpile: { ttl: '5m' } } }, async () => ({
  products: await Promise.all(['1', '2', '3'].map(findProduct)),
}));

// ...or no caching at all.
app.get('/stats', { config: { dogpile: false } }, async () => ({ dbQueries, pid: process.pid }));

try {
  await app.listen({ port, host });
} catch (error) {
  console.error(`cannot listen on ${host}:${port}: ${(error as Error).message}`);
  await cache.close();
  redis?.disconnect();
  process.exit(1);
}
const address = app.server.address();
const actual = typeof address === 'object' && address ? address.port : port;
console.log(`listening on http://${host}:${actual} (cache: ${redis ? 'Redis' : 'in-process'})`);
console.log(`try: curl -i http://${host}:${actual}/products/42`);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: closing`);
  await app.close();
  await cache.close(); // closes only what the cache created; the Redis client is ours to close
  await redis?.quit();
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
