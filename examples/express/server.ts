/**
 * Express + dogpile-guard: GET responses are cached, and concurrent misses for one URL run
 * the handler once — in this process, or across every process sharing REDIS_URL.
 *
 *   node --import tsx examples/express/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 node --import tsx examples/express/server.ts
 *
 * GET /metrics is the Prometheus scrape (prom-client's default registry, with the cache's
 * collectors from dogpile-guard/prometheus); GET /stats counts the "database" queries.
 */
import express from 'express';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { dogpileGuard } from 'dogpile-guard/express';
import { registerDogpileMetrics } from 'dogpile-guard/prometheus';
import { register } from 'prom-client';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';

// With REDIS_URL: one cache for every process on that Redis. Without: in this process.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined;
redis?.on('error', (error) => console.error(`redis: ${error.message}`));
const cache = createCache({ redis });
// dogpile_guard_calls_total{outcome,layer}, loader and wait durations, Redis errors, ...
const metrics = registerDogpileMetrics();

// A slow "database": 200 ms per query, every query counted.
let dbQueries = 0;
async function findProduct(id: string) {
  dbQueries++;
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), pid: process.pid };
}

const app = express();

app.get('/stats', (_req, res) => {
  res.json({ dbQueries, pid: process.pid });
});

app.get('/metrics', async (_req, res) => {
  res.type(register.contentType).send(await register.metrics());
});

// Routes registered after this are cached for 30 s, and concurrent misses for one URL wait for
// the first request's response (X-Cache: MISS, then COALESCED or HIT). /stats and /metrics above are not.
app.use(dogpileGuard({ cache, ttl: '30s' }));

app.get('/products/:id', async (req, res) => {
  res.json(await findProduct(req.params.id));
});

const server = app.listen(port, host, (error?: Error) => {
  if (error) {
    console.error(`cannot listen on ${host}:${port}: ${error.message}`);
    process.exit(1);
  }
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  console.log(`listening on http://${host}:${actual} (cache: ${redis ? 'Redis' : 'in-process'})`);
  console.log(`try: curl -i http://${host}:${actual}/products/42`);
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: closing`);
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  metrics.dispose();
  await cache.close(); // closes only what the cache created; the Redis client is ours to close
  await redis?.quit();
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
