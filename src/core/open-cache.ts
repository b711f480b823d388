import { connectRedis } from '../store/open-store.js';
import { DogpileCache } from './cache.js';
import { resolveCacheOptions, type CacheOptions } from './options.js';

/** A cache its host made and will close, with what closing it takes. */
interface OpenedCache {
  cache: DogpileCache;
  /** Closes the cache, then the Redis connection made for it from a URL (a client passed in stays open). */
  close(): Promise<void>;
}

/**
 * A cache for a host that starts with it (Nest's module): with `redis` as a URL, the options are
 * checked first (a bad option leaves no client open), then startup waits up to
 * `connectWaitMs` for the connection (`onSlow` is told why it goes on without it), so the first
 * requests are coordinated through Redis rather than answered without it.
 */
export async function openCache(options: CacheOptions, connectWaitMs: number, onSlow: (reason: string) => void): Promise<OpenedCache> {
  if (typeof options.redis !== 'string') {
    const cache = new DogpileCache(options);
    return { cache, close: () => cache.close() };
  }
  resolveCacheOptions({ ...options, redis: undefined });
  const connection = await connectRedis(options.redis, connectWaitMs, onSlow);
  const cache = new DogpileCache({ ...options, redis: connection.client });
  return {
    cache,
    close: async () => {
      await cache.close();
      await connection.close();
    },
  };
}
