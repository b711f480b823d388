/**
 * A worker process (a queue consumer, a cron job, ...) that needs a value which is expensive
 * to compute: today's report. With REDIS_URL, however many workers ask for it at once, one
 * of them builds it and the others wait for that result.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/direct/worker.ts
 *   node --import tsx examples/direct/workers.ts      # several workers at the same moment
 *
 * Started by workers.ts, it waits for a `go` message so that all workers ask at once.
 */
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';

const day = new Date().toISOString().slice(0, 10);
const key = process.env.REPORT_KEY ?? `report:${day}`;

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
const cache = createCache({ redis });

let ranLoader = false;
async function buildReport() {
  ranLoader = true;
  await new Promise((resolve) => setTimeout(resolve, 500)); // an expensive aggregation
  return { day, orders: 1289, revenue: 48_210.5, builtBy: process.pid, builtAt: new Date().toISOString() };
}

if (process.send) {
  // Started by workers.ts: say we are ready, then wait for the signal to start.
  await new Promise<void>((resolve) => {
    process.once('message', () => resolve());
    process.send!({ type: 'ready' });
  });
}

const report = await cache.getOrCompute(key, buildReport, '1m');
console.log(`worker ${process.pid}: report for ${report.day} built by ${report.builtBy}${ranLoader ? ' (this worker built it)' : ''}`);
process.send?.({ type: 'done', pid: process.pid, ranLoader, builtBy: report.builtBy });

await cache.close();
await redis?.quit(); // the cache never closes a client it was given
process.disconnect?.();
