/**
 * One app process of the multi-process demo, forked by demo/demo.ts: the demo's Express app
 * on its own port, with its own fake database, and two guarded routes — one on the embedded
 * default cache (this process only) and one on a cache that shares the demo's Redis.
 *
 * It reports `ready` with its port, answers `queries` with its database counts, and on
 * `close` (or when the demo goes away) closes its server, both caches and its Redis client,
 * then exits by itself.
 */
import type { Server } from 'node:http';
import { Redis } from 'ioredis';
import { createCache, getDefaultCache } from 'dogpile-guard';
import { createDemoApp } from './app.js';
import { FakeDatabase } from './fake-db.js';
import { SETTINGS_ENV, type DemoMessage, type WorkerMessage, type WorkerSettings } from './messages.js';

const send = (message: WorkerMessage) => {
  if (process.connected) process.send?.(message);
};

const raw = process.env[SETTINGS_ENV];
if (!raw || !process.send) {
  console.error('demo/worker.ts is started by demo/demo.ts (npm run demo -- --redis URL)');
  process.exit(1);
}
const settings = JSON.parse(raw) as WorkerSettings;

const db = new FakeDatabase(settings.dbMs, settings.dbPool);
const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 1 });
let lastRedisError: Error | undefined;
redis.on('error', (error: Error) => {
  lastRedisError = error;
});
const shared = createCache({ redis, prefix: settings.prefix });
let server: Server | undefined;

let closing: Promise<void> | undefined;
function shutdown(): Promise<void> {
  closing ??= (async () => {
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    }
    await shared.close();
    await getDefaultCache().close();
    await redis.quit().catch(() => redis.disconnect());
    if (process.connected) process.disconnect();
  })();
  return closing;
}

process.on('message', (message: DemoMessage) => {
  if (message.type === 'queries') send({ type: 'queries', queries: db.allQueries() });
  else if (message.type === 'close') void shutdown();
});
// If the demo goes away (Ctrl-C, crash), do not linger.
process.on('disconnect', () => void shutdown());
process.on('SIGINT', () => void shutdown());
process.on('SIGTERM', () => void shutdown());

try {
  // Wait for Redis, so the first herd is coordinated through it rather than answered without it.
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Redis did not answer in 5 s (${lastRedisError?.message ?? 'no error'})`)), 5000);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const app = createDemoApp(db, shared);
  server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)));
  });
  const address = server.address();
  send({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0, pid: process.pid });
} catch (error) {
  send({ type: 'failed', message: (error as Error).message });
  await shutdown();
  process.exitCode = 1;
}
