import type { DogpileCache } from '../core/cache.js';
import { MAX_TAGS } from '../shared/tag-names.js';
import { FleetEntries, type Life } from './fleet-entries.js';
import { NEXT_VALUE_KINDS, secondsToMs, tagList, unknownShape } from './values.js';

/** The header in which Next lists a page's or route's tags. */
const TAGS_HEADER = 'x-next-cache-tags';

/** An entry's lifetime as Next passes it with a value (`ctx.cacheControl`), in seconds; `revalidate: false`: never. */
export interface NextCacheControl {
  revalidate: number | false;
  expire?: number;
}

/** What the handler's `get` answers Next: the value and when it was made (ms since the epoch). */
export interface NextCacheHandlerValue {
  lastModified: number;
  value: unknown;
  cacheControl?: NextCacheControl;
}

/** The class Next's `cacheHandler` option loads (one instance per request; the cache behind them is the factory's). */
export interface NextCacheHandler {
  get(cacheKey: string, ctx?: unknown): Promise<NextCacheHandlerValue | null>;
  set(cacheKey: string, data: unknown, ctx?: unknown): Promise<void>;
  revalidateTag(tags: string | string[], durations?: { expire?: number }): Promise<void>;
  resetRequestCache(): void;
}

/** The class Next loads; `close()` closes the cache behind every instance (and the Redis connection made from a URL). */
export interface NextCacheHandlerClass {
  new (context?: unknown): NextCacheHandler;
  close(): Promise<void>;
}

/** What is stored for one key: Next's value and the lifetime it came with. */
interface IsrRecord {
  data: unknown;
  cacheControl?: NextCacheControl;
}

/** Invalidates `tags` on `cache` (`stale`: served while one refresh runs), in lists an entry could carry; a Redis failure is the cache's event, not the caller's error. */
export async function invalidate(cache: DogpileCache, tags: readonly string[], stale: boolean): Promise<void> {
  for (let i = 0; i < tags.length; i += MAX_TAGS) {
    await cache.invalidateTags(tags.slice(i, i + MAX_TAGS), { stale }).catch(() => undefined);
  }
}

/** A `durations` argument of Next's tag calls: with an `expire` over 0, the entries go stale (served until then); else they are gone. */
export function staleBy(durations: unknown): boolean {
  if (durations === undefined || durations === null || typeof durations !== 'object') return false;
  const expire = (durations as { expire?: unknown }).expire;
  return typeof expire === 'number' && expire > 0;
}

/** The class over `cache` (see `createCacheHandler`). */
export function cacheHandlerClass(cache: DogpileCache): NextCacheHandlerClass {
  const entries = new FleetEntries<IsrRecord>(cache);
  const never = Math.min(cache.options.tagStampTtl, 365 * 24 * 3600 * 1000);

  /** How long `data` lives, from its kind and Next's context. */
  function lifeOf(data: { kind: string; revalidate?: unknown; tags?: unknown; headers?: Record<string, unknown> }, ctx: Record<string, unknown>): Life {
    if (data.kind === 'FETCH') {
      const revalidate = secondsToMs(data.revalidate ?? ctx.revalidate, never);
      return { revalidate, expire: never, tags: [...new Set([...tagList(ctx.tags), ...tagList(data.tags)])] };
    }
    const control = ctx.cacheControl as NextCacheControl | undefined;
    const revalidate = secondsToMs(control?.revalidate, never);
    return { revalidate, expire: Math.max(revalidate, secondsToMs(control?.expire, never)), tags: tagList(data.headers?.[TAGS_HEADER]) };
  }

  return class DogpileCacheHandler implements NextCacheHandler {
    /** Closes the cache behind every instance (at shutdown; Next itself never calls it). */
    static close(): Promise<void> {
      return cache.close();
    }

    constructor(context?: unknown) {
      if (context !== undefined && (context === null || typeof context !== 'object')) throw unknownShape('context', `expected Next's handler context object, got ${context === null ? 'null' : typeof context}`);
    }

    async get(cacheKey: string, ctx?: unknown): Promise<NextCacheHandlerValue | null> {
      if (typeof cacheKey !== 'string' || cacheKey === '') throw unknownShape('cacheKey', `expected a non-empty string, got ${typeof cacheKey}`);
      const context = (ctx ?? {}) as Record<string, unknown>;
      const softTags = context.kind === 'FETCH' ? tagList(context.softTags) : undefined;
      const found = await entries.read(cacheKey, softTags);
      if (found === undefined) return null;
      const { data, cacheControl } = found.value;
      return cacheControl === undefined ? { lastModified: found.createdAt, value: data } : { lastModified: found.createdAt, value: data, cacheControl };
    }

    async set(cacheKey: string, data: unknown, ctx?: unknown): Promise<void> {
      const context = (ctx ?? {}) as Record<string, unknown>;
      if (data === null || data === undefined) {
        // Nothing to store for this key: its lead (if this process holds it) is handed back.
        entries.abandon(cacheKey);
        return;
      }
      const kind = typeof data === 'object' ? (data as { kind?: unknown }).kind : undefined;
      if (typeof kind !== 'string' || !NEXT_VALUE_KINDS.has(kind)) {
        entries.abandon(cacheKey);
        throw unknownShape('data.kind', `a value of kind ${JSON.stringify(kind)} is not one Next stores`);
      }
      const value = data as { kind: string; revalidate?: unknown; tags?: unknown; headers?: Record<string, unknown> };
      const life = lifeOf(value, context);
      const control = context.cacheControl as NextCacheControl | undefined;
      const record: IsrRecord = control === undefined ? { data } : { data, cacheControl: { revalidate: control.revalidate, ...(control.expire === undefined ? {} : { expire: control.expire }) } };
      await entries.write(cacheKey, record, life);
    }

    async revalidateTag(tags: string | string[], durations?: { expire?: number }): Promise<void> {
      await invalidate(cache, tagList(typeof tags === 'string' ? [tags] : tags), staleBy(durations));
    }

    resetRequestCache(): void {
      // Nothing is held per request: stamps and entries are followed through Redis.
    }
  };
}
