import type { DogpileCache } from '../core/cache.js';
import { AbandonedLoad } from '../core/settled.js';
import { resolveInline, setComputed, tagStamps } from '../core/internal.js';
import type { LoaderContext } from '../core/types.js';
import { MAX_TAGS } from '../shared/tag-names.js';

/**
 * Next.js asks its cache handlers in two steps: `get` (nothing found: it renders) and, later, a
 * `set` of what it rendered. The miss protocol wants one call with a loader. Here the two
 * meet: a `get` runs the cache's protocol with a loader that stands for the render — when this
 * process wins the key's lead, the loader starts, the `get` answers "not found" (Next renders)
 * and the loader's value is the one the following `set` of the key hands in. Every other
 * caller of the key, in this process or any sharing the Redis, waits for that value as it waits
 * for any loader's. A lead whose `set` never comes (the render failed, or was not cacheable) is
 * handed back after `lockTtl`, and one of the waiters leads next.
 */

/** How long an entry lives, as Next says it (ms): fresh for `revalidate`, kept until `expire` (at least `revalidate`). */
export interface Life {
  revalidate: number;
  expire: number;
  tags: readonly string[];
}

/** What is stored for Next: its value, and how long it stays fresh (ms) so that every process answers alike. */
interface Stored<V> {
  value: V;
  revalidate: number;
  /** When it was handed in (ms, on the store's clock). */
  madeAt: number;
}

/** An entry found for Next: its value, when it was made (ms, on this process's clock, as Next reads it), and whether this caller must regenerate it. */
export interface Found<V> {
  value: V;
  /** When the value was made, on this process's wall clock (what Next compares with its own). */
  createdAt: number;
  /** This caller won the refresh of a stale value: it regenerates it (its `set` ends the refresh). */
  due: boolean;
  /** How long the value stays fresh (ms), as stored. */
  revalidate: number;
  /** When the value was made, on the store's clock. */
  madeAt: number;
}

/** A lead of this process: what the key's following `set` settles. */
interface Lead {
  /** The stale value being refreshed (this process answers it while it regenerates); absent: a miss. */
  stale: Stored<unknown> | undefined;
  settle(value: unknown, life: Life): void;
  abandon(): void;
}

/** A value never revalidated lives this long at most (ms). */
const YEAR_MS = 365 * 24 * 3600 * 1000;

export class FleetEntries<V> {
  /** The keys this process leads, until their `set` (or until `lockTtl` passes). */
  private readonly leads = new Map<string, Lead>();

  constructor(readonly cache: DogpileCache) {}

  /**
   * The entry of `key` for Next, or undefined when this caller is to render it (a miss, with the
   * key's lead taken: its `set` is awaited by every other caller). `softTags`: tags of the
   * request (not of the entry) whose invalidation since the entry was made makes it a miss,
   * regenerated once fleet-wide. Never rejects: Redis unusable reads as an empty cache.
   */
  async read(key: string, softTags?: readonly string[]): Promise<Found<V> | undefined> {
    const held = this.leads.get(key);
    // This process renders the key already: a miss again (Next renders once per process), or the stale value it is refreshing.
    if (held !== undefined) return held.stale === undefined ? undefined : this.found(held.stale as Stored<V>, this.cache.now(), false);
    const found = await this.lookup(key, false);
    if (found === undefined || !softTags?.length || found.due) return found;
    const invalidated = await this.latestStamp(softTags);
    if (invalidated < found.madeAt) return found;
    // A tag of the request was invalidated since the value was made: one caller in the fleet
    // regenerates it, the others wait for that (or take a value made since, if one was stored
    // before this caller looked again).
    return this.lookup(key, true, invalidated);
  }

  /**
   * Ends this process's lead of `key` with `value` (stored, handed to every waiter), or, with
   * no lead here, stores it. Never rejects on a Redis failure (the value is then this render's only).
   */
  async write(key: string, value: V, life: Life): Promise<void> {
    const lead = this.leads.get(key);
    if (lead !== undefined) {
      lead.settle(value, life);
      return;
    }
    const shape = storedShape(life, this.cache.options.tagStampTtl);
    if (shape === undefined) return;
    const stored: Stored<V> = { value, revalidate: life.revalidate, madeAt: this.cache.now() };
    await setComputed(this.cache, key, stored, { ttl: shape.ttl, tags: shape.tags }, 0, shape.window).catch(() => undefined);
  }

  /** Hands back this process's lead of `key` without a value (the render produced nothing to store). */
  abandon(key: string): void {
    this.leads.get(key)?.abandon();
  }

  /**
   * The latest invalidation of `tags` (ms since the epoch on this process's clock; 0: none),
   * hard or stale. One read of the stamps this process does not follow yet; 0 if Redis fails.
   */
  async latestInvalidation(tags: readonly string[]): Promise<number> {
    const at = await this.latestStamp(tags);
    return at === 0 ? 0 : Math.round(this.localTime(at));
  }

  /** The latest stamp of `tags`, on the store's clock (0: none, or Redis unusable). */
  private async latestStamp(tags: readonly string[]): Promise<number> {
    const list = [...new Set(tags.filter((t) => typeof t === 'string' && t !== ''))];
    if (list.length === 0) return 0;
    try {
      const stamps = await tagStamps(this.cache, list.length > MAX_TAGS ? list.slice(0, MAX_TAGS) : list);
      let latest = 0;
      for (const s of stamps) latest = Math.max(latest, s.hard, s.stale);
      if (list.length > MAX_TAGS) latest = Math.max(latest, await this.latestStamp(list.slice(MAX_TAGS)));
      return latest;
    } catch {
      return 0;
    }
  }

  /** Runs the key's protocol with a loader that stands for Next's render (see the module's comment). */
  private lookup(key: string, forceRefresh: boolean, newerThan?: number): Promise<Found<V> | undefined> {
    const { lockTtl } = this.cache.options;
    return new Promise((answer) => {
      let answered = false;
      const reply = (found: Found<V> | undefined) => {
        if (answered) return;
        answered = true;
        answer(found);
      };
      const loader = async (ctx: LoaderContext) => {
        if (newerThan !== undefined) {
          // A forced lookup looks past every value stored before it began: one stored since the
          // invalidation is still the answer (handed to this call's waiters, not stored again).
          const current = await this.cache.get<Stored<V>>(key).catch(() => undefined);
          if (current !== undefined && current.madeAt > newerThan) {
            ctx.skip();
            reply(this.found(current, current.madeAt, false));
            return current;
          }
        }
        return this.leadUntilSet(key, ctx, lockTtl, reply);
      };
      resolveInline(this.cache, key, loader, { ttl: lockTtl, forceRefresh }).then(
        (result) => reply(this.found(result.value, result.createdAt, false)),
        () => reply(undefined),
      );
    });
  }

  /** This process leads `key`: answered "not found" (or, refreshing, the stale value) at once; the loader's value is what the key's `set` hands in. */
  private leadUntilSet(key: string, ctx: LoaderContext, lockTtl: number, reply: (found: Found<V> | undefined) => void): Promise<Stored<V>> {
    return new Promise<Stored<V>>((resolve, reject) => {
      const stale = ctx.stale?.value as Stored<V> | undefined;
      const end = () => {
        clearTimeout(timer);
        if (this.leads.get(key) === lead) this.leads.delete(key);
      };
      const lead: Lead = {
        stale,
        settle: (value, life) => {
          end();
          const shape = storedShape(life, this.cache.options.tagStampTtl);
          if (shape === undefined) ctx.decide('share');
          else ctx.decide({ decision: 'store', ttl: shape.ttl, staleWhileRevalidate: shape.window, staleIfError: 0, tags: [...shape.tags] });
          resolve({ value: value as V, revalidate: life.revalidate, madeAt: this.cache.now() });
        },
        abandon: () => {
          end();
          reject(new AbandonedLoad(`no value was set for ${key}`));
        },
      };
      // No `set` within lockTtl: the lead is handed back (a waiter leads next).
      const timer = setTimeout(lead.abandon, lockTtl);
      timer.unref();
      this.leads.set(key, lead);
      reply(stale === undefined ? undefined : this.found(stale, ctx.stale!.createdAt, true));
    });
  }

  /** A stored value as Next reads it: made at `createdAt` (store's clock), answered as due for regeneration only to the caller that refreshes it. */
  private found(stored: Stored<V>, createdAt: number, due: boolean): Found<V> {
    const now = Date.now();
    const made = this.localTime(createdAt);
    const revalidate = stored.revalidate;
    // Next decides freshness by its own clock from `createdAt`: the caller that refreshes sees it past
    // `revalidate`, every other caller sees it fresh (the refresh is running elsewhere), whatever the clocks say.
    const createdAtHere = due ? Math.min(made, now - revalidate - 1) : Math.max(Math.min(made, now), now - Math.floor(revalidate / 2));
    return { value: stored.value, createdAt: createdAtHere, due, revalidate, madeAt: createdAt };
  }

  /** A time on the store's clock (the Redis server's) as this process's wall clock reads it. */
  private localTime(storeTime: number): number {
    return Date.now() - (this.cache.now() - storeTime);
  }
}

/** How a value with `life` is stored: fresh `ttl`, then served stale for `window` while one refresh runs; undefined: not stored. */
/** How a value with `life` is stored: fresh for `ttl`, then served stale for `window` while one refresh runs; undefined: not stored (never fresh, or more tags than an entry carries). */
function storedShape(life: Life, tagStampTtl: number): { ttl: number; window: number; tags: readonly string[] } | undefined {
  if (!(life.revalidate > 0) || !(life.expire > 0) || life.tags.length > MAX_TAGS) return undefined;
  // A tagged entry lives no longer than its tags' stamps are kept (tagStampTtl).
  const cap = life.tags.length > 0 ? Math.min(YEAR_MS, tagStampTtl) : YEAR_MS;
  const ttl = Math.min(life.revalidate, cap);
  const window = Math.max(0, Math.min(Math.max(life.expire, ttl), cap) - ttl);
  return { ttl, window, tags: life.tags };
}
