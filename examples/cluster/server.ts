/**
 * Node's cluster module: several worker processes serve one port, and share one cache
 * through Redis — a herd of requests for one URL, spread over every worker, runs the
 * handler (the database query) once.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/cluster/server.ts
 *   node --import tsx examples/cluster/herd.ts http://127.0.0.1:3000/products/42
 *
 * Environment: REDIS_URL (required), PORT (3000; 0 = any free port), HOST (127.0.0.1),
 * WORKERS (4).
 *
 * The primary counts, for the whole cluster, the requests each worker answered and the
 * database queries each one ran (the workers tell it over IPC); GET /stats shows them.
 */
import cluster, { type Worker } from 'node:cluster';
import express from 'express';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { dogpileGuard } from 'dogpile-guard/express';

const redisUrl = process.env.REDIS_URL;
const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const workers = Number(process.env.WORKERS ?? 4);

/** Worker → primary. */
type Report = { type: 'request' } | { type: 'db-query'; path: string } | { type: 'stats?'; id: number };
/** Primary → worker. */
type Order = { type: 'stats'; id: number; stats: ClusterStats } | { type: 'shutdown' };

interface ClusterStats {
  workers: number;
  /** Requests each worker answered, by worker id. */
  requests: Record<string, number>;
  /** Database queries each worker ran, by worker id. */
  dbQueries: Record<string, number>;
  dbQueriesTotal: number;
}

if (!redisUrl) {
  console.error('The cluster example needs a Redis for its workers to share. Start one and set REDIS_URL, e.g.:');
  console.error('  REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/cluster/server.ts');
  process.exit(1);
}
if (!Number.isInteger(workers) || workers < 1) {
  console.error(`WORKERS must be a whole number of at least 1, got ${process.env.WORKERS}`);
  process.exit(1);
}

if (cluster.isPrimary) runPrimary();
else await runWorker(redisUrl);

function runPrimary(): void {
  const stats: ClusterStats = { workers, requests: {}, dbQueries: {}, dbQueriesTotal: 0 };
  let listening = 0;
  let stopping = false;

  const start = (): Worker => {
    const worker = cluster.fork();
    worker.on('message', (report: Report) => {
      const id = String(worker.id);
      if (report.type === 'request') {
        stats.requests[id] = (stats.requests[id] ?? 0) + 1;
      } else if (report.type === 'db-query') {
        stats.dbQueries[id] = (stats.dbQueries[id] ?? 0) + 1;
        stats.dbQueriesTotal++;
        console.log(`worker ${id} (pid ${worker.process.pid}) queried the database for ${report.path} (cluster total: ${stats.dbQueriesTotal})`);
      } else if (report.type === 'stats?') {
        worker.send({ type: 'stats', id: report.id, stats } satisfies Order);
      }
    });
    return worker;
  };

  cluster.on('listening', (_worker, address) => {
    if (++listening === workers) {
      console.log(`listening on http://${host}:${address.port} (${workers} workers, cache shared through Redis)`);
      console.log(`try: node --import tsx examples/cluster/herd.ts http://${host}:${address.port}/products/42`);
    }
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    console.error(`worker ${worker.id} exited (${signal ?? code}); starting another`);
    start();
  });

  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping ${workers} workers`);
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker?.isConnected()) worker.send({ type: 'shutdown' } satisfies Order);
    }
    // The primary exits by itself once every worker is gone; this is only a safety net.
    setTimeout(() => {
      console.error('workers did not stop in 10 s; killing them');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
    }, 10_000).unref();
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  for (let i = 0; i < workers; i++) start();
}

async function runWorker(url: string): Promise<void> {
  const report = (message: Report) => {
    if (process.connected) process.send!(message);
  };

  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', (error) => console.error(`worker ${cluster.worker!.id}: redis: ${error.message}`));
  // One cache per worker process, all on the same Redis: they coordinate through it.
  const cache = createCache({ redis });

  async function findProduct(id: string) {
    report({ type: 'db-query', path: `/products/${id}` });
    await new Promise((resolve) => setTimeout(resolve, 200)); // a slow query
    return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), queriedBy: `worker ${cluster.worker!.id} (pid ${process.pid})` };
  }

  const pendingStats = new Map<number, (stats: ClusterStats) => void>();
  let nextId = 0;

  const app = express();
  app.get('/stats', async (_req, res) => {
    const id = nextId++;
    const stats = await new Promise<ClusterStats>((resolve) => {
      pendingStats.set(id, resolve);
      report({ type: 'stats?', id });
    });
    res.json(stats);
  });
  app.use((_req, _res, next) => {
    report({ type: 'request' });
    next();
  });
  app.use(dogpileGuard({ cache, ttl: '30s' }));
  app.get('/products/:id', async (req, res) => {
    res.json(await findProduct(req.params.id));
  });

  // Wait for Redis before taking requests, so the first herd is coordinated through it.
  await new Promise<void>((resolve) => (redis.status === 'ready' ? resolve() : redis.once('ready', () => resolve())));
  const server = app.listen(port, host);

  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await cache.close();
    await redis.quit();
    process.disconnect();
  };
  process.on('message', (order: Order) => {
    if (order.type === 'stats') {
      pendingStats.get(order.id)?.(order.stats);
      pendingStats.delete(order.id);
    } else if (order.type === 'shutdown') {
      void shutdown();
    }
  });
  // Ctrl-C in a terminal signals the whole process group, workers included.
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}
