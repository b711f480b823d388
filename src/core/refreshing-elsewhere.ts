import { monotonicNow } from '../shared/clock.js';
import type { StoredEntry } from '../store/types.js';
import type { GuardedBackend } from './guarded-backend.js';

/** A key whose stale value another process is refreshing, followed on its channel. */
interface Followed {
  /** Monotonic ms from which the key's channel is live: lookups sent from then on are covered. */
  liveAt: number | undefined;
  /** The stale value to answer, once a lookup sent while the channel was live said so. */
  entry: StoredEntry | undefined;
  /** Monotonic ms when the refresh's lock runs out (then lookups go to Redis again). */
  until: number;
  timer: NodeJS.Timeout | undefined;
  unlisten: (() => void) | undefined;
  ended: boolean;
}

/**
 * Stale values under `staleWhileRevalidate` whose refresh runs in another process. Each such
 * lookup answers the stale value at once; without this, every flight of this process would
 * ask Redis again until the refresh commits (a hot key: dozens of lookups per refresh and
 * process). Instead the process follows the key's channel, and once a lookup sent while the
 * channel was live has said "stale, refreshed elsewhere", later flights answer that value from
 * memory until the channel carries any news of the key (the refresh's commit or failure, a
 * write, a delete, a reconnect) or the refresh's lock runs out. Entries with tags are not kept
 * (an invalidation travels on the tag's channel, not the key's).
 */
export class RefreshingElsewhere {
  private readonly keys = new Map<string, Followed>();

  constructor(private readonly backend: GuardedBackend) {}

  /** The stale value of `key` while its refresh runs elsewhere, else undefined. */
  get(key: string): StoredEntry | undefined {
    const followed = this.keys.get(key);
    if (followed?.entry === undefined) return undefined;
    if (monotonicNow() < followed.until) return followed.entry;
    this.end(key, followed);
    return undefined;
  }

  /**
   * A lookup sent at `sentAt` (monotonic ms) found `entry` stale, its refresh led elsewhere
   * under a lock with `remaining` ms left. Follows the key's channel if it is not followed
   * yet; keeps the entry when the channel was live before the lookup was sent.
   */
  heard(key: string, entry: StoredEntry, remaining: number, sentAt: number): void {
    if (entry.tags !== undefined || remaining <= 0) return;
    let followed = this.keys.get(key);
    if (followed === undefined) {
      followed = this.follow(key);
    } else if (followed.liveAt !== undefined && sentAt >= followed.liveAt) {
      followed.entry = entry;
    }
    const until = monotonicNow() + remaining;
    if (until > followed.until) {
      followed.until = until;
      this.arm(key, followed, remaining);
    }
  }

  /** A lookup found the key otherwise (fresh, missing, led here): its refresh is over. */
  forget(key: string): void {
    const followed = this.keys.get(key);
    if (followed) this.end(key, followed);
  }

  /** Stops following every key. */
  clear(): void {
    for (const [key, followed] of this.keys) this.end(key, followed);
  }

  private follow(key: string): Followed {
    const followed: Followed = { liveAt: undefined, entry: undefined, until: 0, timer: undefined, unlisten: undefined, ended: false };
    this.keys.set(key, followed);
    this.backend.listen(key, () => this.end(key, followed)).then(
      (unlisten) => {
        if (followed.ended) return unlisten();
        followed.unlisten = unlisten;
        followed.liveAt = monotonicNow();
      },
      () => this.end(key, followed),
    );
    return followed;
  }

  private arm(key: string, followed: Followed, ms: number): void {
    if (followed.timer) clearTimeout(followed.timer);
    followed.timer = setTimeout(() => this.end(key, followed), ms);
    followed.timer.unref();
  }

  private end(key: string, followed: Followed): void {
    if (followed.ended) return;
    followed.ended = true;
    if (followed.timer) clearTimeout(followed.timer);
    if (this.keys.get(key) === followed) this.keys.delete(key);
    followed.unlisten?.();
  }
}
