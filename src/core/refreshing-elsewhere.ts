import { monotonicNow } from '../shared/clock.js';
import { keyHintSize } from '../shared/keys.js';
import type { MissCoordinator, StoredEntry } from '../store/types.js';

/** What following a key takes: its channel (GuardedBackend's, bounded by `commandTimeout`), and whether it is live. */
type KeyChannels = Pick<MissCoordinator, 'listen' | 'live'>;

/** How long a key is followed at most after its last refresh elsewhere was heard of (a key refreshed on a cycle stays followed). */
const FOLLOW_MAX_MS = 60_000;

/**
 * Most keys a cache follows at once while other processes refresh them (each one keeps its
 * channel subscribed); past it, the key heard of longest ago is forgotten first.
 */
export const FOLLOWED_MAX = 1000;
/** The most key text (`keyHintSize`) those keys may hold, whatever their length: 1 MB. */
export const FOLLOWED_MAX_BYTES = 1024 * 1024;

/** A key whose stale value another process refreshes (or refreshed lately), followed on its channel. */
interface Followed {
  /** Monotonic ms from which the key's channel is live: lookups sent from then on are covered. */
  liveAt: number | undefined;
  /** The stale value to answer, once a lookup sent while the channel was live said so. */
  entry: StoredEntry | undefined;
  /** Monotonic ms of the last message heard on the channel. */
  newsAt: number;
  /** Monotonic ms when the refresh's lock runs out (then lookups go to Redis again). */
  until: number;
  /** Ends the following once the key has not been refreshed elsewhere for a while. */
  idle: NodeJS.Timeout | undefined;
  /** Lets the channel go; set once the subscription is confirmed. */
  unlisten: ((atOnce?: boolean) => void) | undefined;
  ended: boolean;
  /** `keyHintSize` of the key: what its channel counts against `FOLLOWED_MAX_BYTES` until it is let go. */
  size: number;
}

/**
 * Stale values under `staleWhileRevalidate` whose refresh runs in another process. Each such
 * lookup answers the stale value at once; without this, every flight of this process would
 * ask Redis again until the refresh commits (a hot key: dozens of lookups per refresh and
 * process). Instead the process follows the key's channel, and once a lookup sent while the
 * channel was live has said "stale, refreshed elsewhere", later flights answer that value from
 * memory until the channel carries any news of the key (the refresh's commit or failure, a
 * write, a delete; a reconnect, after which only lookups sent later count) or the refresh's
 * lock runs out. The channel stays followed for twice the value's TTL after the last such
 * lookup (at most a minute), so a key refreshed on a cycle is answered from memory from the
 * first lookup of each refresh, without subscribing again. Entries with tags are not kept (an
 * invalidation travels on the tag's channel, not the key's).
 *
 * At most `FOLLOWED_MAX` channels and `FOLLOWED_MAX_BYTES` of key text are held at every
 * moment, checked before a key is followed: a channel counts from the moment it is asked for
 * until it is let go (unsubscribed at once, without the subscriber's linger), so subscriptions
 * still being confirmed count too. To make room for a new key, the keys heard of longest ago
 * whose subscription is confirmed are let go; when that is not enough (the rest are still being
 * subscribed), or the key alone is longer than the byte budget, the key is not followed and its
 * lookups simply go to Redis.
 */
export class RefreshingElsewhere {
  /** In the order they were last heard of: the first is the one to forget. */
  private readonly keys = new Map<string, Followed>();
  /** Channels held: those of `keys`, and those of keys forgotten while their subscription was being confirmed. */
  private held = 0;
  /** `keyHintSize` of the keys whose channels are held. */
  private heldBytes = 0;

  constructor(private readonly backend: KeyChannels) {}

  /** Channels held now and the key text they stand for (what the bounds apply to). */
  get following(): { channels: number; bytes: number } {
    return { channels: this.held, bytes: this.heldBytes };
  }

  /** The stale value of `key` while its refresh runs elsewhere, else undefined. */
  get(key: string): StoredEntry | undefined {
    const followed = this.keys.get(key);
    if (followed?.entry === undefined) return undefined;
    // Only while the channel that would carry the refresh's news is up.
    if (monotonicNow() < followed.until && this.backend.live(key)) return followed.entry;
    followed.entry = undefined;
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
      const size = keyHintSize(key);
      if (!this.makeRoom(size)) return;
      followed = this.follow(key, size);
    } else {
      // Heard of again: the last to be forgotten.
      this.keys.delete(key);
      this.keys.set(key, followed);
    }
    // Not when news of the key arrived after the lookup was sent: the refresh's commit can
    // overtake the lookup's reply (another connection), and the value is then not stale.
    if (followed.liveAt !== undefined && sentAt >= followed.liveAt && followed.newsAt < sentAt) {
      followed.entry = entry;
      followed.until = monotonicNow() + remaining;
    }
    if (followed.idle) clearTimeout(followed.idle);
    const current = followed;
    followed.idle = setTimeout(() => this.end(key, current), Math.min(FOLLOW_MAX_MS, Math.max(remaining, 2 * entry.ttl)));
    followed.idle.unref();
  }

  /** A lookup found the key otherwise (fresh, missing, led here): its refresh is over. */
  forget(key: string): void {
    const followed = this.keys.get(key);
    if (followed) followed.entry = undefined;
  }

  /** Stops following every key. */
  clear(): void {
    for (const [key, followed] of this.keys) this.end(key, followed);
  }

  /**
   * Whether one more channel, for a key of `size`, fits within the bounds, once the keys heard
   * of longest ago whose subscription is confirmed are let go as needed (at once: their room is
   * free when this returns). Keys still being subscribed are not let go here: their room would
   * be free only later.
   */
  private makeRoom(size: number): boolean {
    const fits = () => this.held < FOLLOWED_MAX && this.heldBytes + size <= FOLLOWED_MAX_BYTES;
    if (size > FOLLOWED_MAX_BYTES) return false;
    if (fits()) return true;
    for (const [key, followed] of this.keys) {
      if (followed.unlisten === undefined) continue;
      this.end(key, followed);
      if (fits()) return true;
    }
    return false;
  }

  private follow(key: string, size: number): Followed {
    const followed: Followed = { liveAt: undefined, entry: undefined, newsAt: 0, until: 0, idle: undefined, unlisten: undefined, ended: false, size };
    this.keys.set(key, followed);
    this.held += 1;
    this.heldBytes += size;
    const heard = (outcome: unknown) => {
      followed.entry = undefined;
      followed.newsAt = monotonicNow();
      // Closed or reconnected: a message may have been lost; only lookups sent from now on (while the channel is live) count.
      if (outcome === null && followed.liveAt !== undefined) followed.liveAt = monotonicNow();
    };
    this.backend.listen(key, heard).then(
      (unlisten) => {
        if (followed.ended) {
          // Forgotten while it was being subscribed: let go now that it is.
          unlisten(true);
          this.release(followed);
          return;
        }
        followed.unlisten = unlisten;
        followed.liveAt = monotonicNow();
      },
      () => {
        this.end(key, followed);
        this.release(followed);
      },
    );
    return followed;
  }

  /** Stops following `key`; its channel is let go at once if subscribed, else once it is (see `follow`). */
  private end(key: string, followed: Followed): void {
    if (followed.ended) return;
    followed.ended = true;
    followed.entry = undefined;
    if (followed.idle) clearTimeout(followed.idle);
    if (this.keys.get(key) === followed) this.keys.delete(key);
    if (followed.unlisten) {
      followed.unlisten(true);
      this.release(followed);
    }
  }

  /** The channel of `followed` is let go: its room is free. */
  private release(followed: Followed): void {
    this.held -= 1;
    this.heldBytes -= followed.size;
  }
}
