import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';

// One cache per server process (module state survives between requests). With REDIS_URL, one
// for every process and pod on that Redis; without, in this process.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined;
redis?.on('error', (error) => console.error(`redis: ${error.message}`));
export const cache = createCache({ redis });
export const cacheKind = redis ? 'Redis' : 'in-process';

// A slow "database": 200 ms per query, every query counted.
export const db = { queries: 0 };
export async function findProduct(id: string) {
  db.queries++;
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), pid: process.pid };
}
