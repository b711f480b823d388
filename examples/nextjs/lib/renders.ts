import { Redis } from 'ioredis';

// Renders and runs counted where every process sees them: in Redis when REDIS_URL is set
// (the example's tests read them), else in this process. A count that cannot be written is
// skipped: the page still renders.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true }) : undefined;
redis?.on('error', () => {});
const local = new Map<string, number>();

export async function countRender(name: string): Promise<number> {
  if (!redis) {
    local.set(name, (local.get(name) ?? 0) + 1);
    return local.get(name)!;
  }
  return redis.incr(`example:renders:${name}`).catch(() => -1);
}

/** A value the app reads from its "database" (a Redis key in this example; 1 when unset). */
export async function readVersion(name: string): Promise<string> {
  if (!redis) return '1';
  return (await redis.get(`example:version:${name}`).catch(() => null)) ?? '1';
}

export const slow = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
