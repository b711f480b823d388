import type { DogpileCache } from '../core/cache.js';
import { invalidate, staleBy } from './cache-handler.js';
import { FleetEntries } from './fleet-entries.js';
import { bufferStream, isReadableStream, secondsToMs, streamOf, tagList, unknownShape } from './values.js';

/** A `'use cache'` entry as Next 15.5 and 16 hand it over and read it back (times in seconds, `timestamp` in ms). */
export interface NextUseCacheEntry {
  value: ReadableStream<Uint8Array>;
  tags: string[];
  stale: number;
  timestamp: number;
  expire: number;
  revalidate: number;
}

/** The object Next's `cacheHandlers` option loads (`default`, `remote`) for `'use cache'`. */
export interface NextUseCacheHandler {
  get(cacheKey: string, softTags?: string[]): Promise<NextUseCacheEntry | undefined>;
  set(cacheKey: string, pendingEntry: Promise<NextUseCacheEntry>): Promise<void>;
  refreshTags(): Promise<void>;
  /** The latest invalidation of `tags` (ms since the epoch; 0: never). Next 15.5 passes the tags as arguments, Next 16 as one array. */
  getExpiration(...tags: (string | string[])[]): Promise<number>;
  updateTags(tags: string[], durations?: { expire?: number }): Promise<void>;
  /** Next 15.5's name for `updateTags` (the tags as arguments). */
  expireTags(...tags: string[]): Promise<void>;
  /** Next 15.5: tags another process invalidated (stamps are followed through Redis: nothing to do). */
  receiveExpiredTags(...tags: string[]): Promise<void>;
  /** Closes the cache behind the handler (at shutdown; Next itself never calls it). */
  close(): Promise<void>;
}

/** What is stored for one entry: its bytes (read once from Next's stream) and its metadata. */
interface UseCacheRecord {
  bytes: Uint8Array;
  tags: string[];
  stale: number;
  expire: number;
  revalidate: number;
}

/** The handler over `cache` (see `createUseCacheHandler`). */
export function useCacheHandler(cache: DogpileCache): NextUseCacheHandler {
  const entries = new FleetEntries<UseCacheRecord>(cache);
  const flat = (tags: (string | string[])[]) => tagList(tags.flat());
  return {
    async get(cacheKey, softTags) {
      if (typeof cacheKey !== 'string' || cacheKey === '') throw unknownShape('cacheKey', `expected a non-empty string, got ${typeof cacheKey}`);
      const found = await entries.read(cacheKey, tagList(softTags));
      if (found === undefined) return undefined;
      const { bytes, tags, stale, expire, revalidate } = found.value;
      return { value: streamOf(bytes), tags: [...tags], stale, expire, revalidate, timestamp: found.createdAt };
    },

    async set(cacheKey, pendingEntry) {
      if (pendingEntry === null || typeof (pendingEntry as { then?: unknown } | undefined)?.then !== 'function') {
        entries.abandon(cacheKey);
        throw unknownShape('pendingEntry', `expected a promise of a cache entry, got ${pendingEntry === null ? 'null' : typeof pendingEntry}`);
      }
      // The render failed, or streamed an error: nothing is stored, a waiter leads next.
      const failed = () => {
        entries.abandon(cacheKey);
        return undefined;
      };
      const entry = await pendingEntry.then((e) => e, failed);
      if (entry === undefined) return;
      if (entry === null || typeof entry !== 'object' || !isReadableStream(entry.value)) {
        entries.abandon(cacheKey);
        throw unknownShape('pendingEntry', 'the entry has no value stream');
      }
      const bytes = await bufferStream(entry.value).then((b) => b, failed);
      if (bytes === undefined) return;
      const record: UseCacheRecord = { bytes, tags: tagList(entry.tags), stale: entry.stale, expire: entry.expire, revalidate: entry.revalidate };
      const revalidate = secondsToMs(entry.revalidate, 0);
      await entries.write(cacheKey, record, { revalidate, expire: Math.max(revalidate, secondsToMs(entry.expire, 0)), tags: record.tags });
    },

    async refreshTags() {
      // Tag stamps are followed through Redis as they change: nothing to refresh per request.
    },

    getExpiration(...tags) {
      return entries.latestInvalidation(flat(tags));
    },

    async updateTags(tags, durations) {
      await invalidate(cache, tagList(tags), staleBy(durations));
    },

    async expireTags(...tags) {
      await invalidate(cache, tagList(tags), false);
    },

    async receiveExpiredTags() {
      // Stamps are followed through Redis.
    },

    close() {
      return cache.close();
    },
  };
}
