import { monotonicNow } from '../shared/clock.js';
import type { RedisClient } from '../redis/client.js';
import { existingSharedSubscriber, sharedSubscriber } from '../redis/subscriber.js';
import { cacheKeys } from './key.js';
import type { L1 } from './l1.js';
import type { Outcome, StoredEntry } from './types.js';

/** A key whose channel this process follows, for its L1 copy. */
interface Link {
  /** Since when (monotonic ms) every announcement on the channel reaches this process; undefined while subscribing. */
  liveAt: number | undefined;
  unlisten: (() => void) | undefined;
  dropped: boolean;
}

/**
 * The channels of the keys held in L1, followed so that every process's copy hears of the
 * others' writes, deletes and commits: a value announced is kept, anything else drops the copy
 * or makes it no hit until read again.
 */
export class L1Links {
  /** Keys held in L1 whose channel this process follows. */
  private readonly links = new Map<string, Link>();

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly l1: L1,
    /** When (monotonic ms) the read or write that produced an entry was sent (shared with the backend). */
    private readonly sentAt: WeakMap<StoredEntry, number>,
    private readonly now: () => number,
    private readonly parse: (message: Buffer) => Outcome,
  ) {}

  get(key: string): Link | undefined {
    return this.links.get(key);
  }

  has(key: string): boolean {
    return this.links.has(key);
  }

  /** Follows the channel of `key` (held in L1): its announcements update or drop the copy. */
  follow(key: string): void {
    const link: Link = { liveAt: undefined, unlisten: undefined, dropped: false };
    this.links.set(key, link);
    // The link lives as long as the key has a place in L1 (bounded by `l1.max`).
    if (!this.l1.has(key)) this.l1.heard(key, 0);
    sharedSubscriber(this.client)
      .listen(cacheKeys(this.prefix, key).channel, (message) => this.heard(key, link, message))
      .then(
        (unlisten) => {
          if (link.dropped) {
            unlisten();
            return;
          }
          link.unlisten = unlisten;
          link.liveAt = monotonicNow();
        },
        () => {
          // Not followed (the subscriber failed): the copy stays a fallback; the next keep tries again.
          if (this.links.get(key) === link) this.links.delete(key);
        },
      );
  }

  /** `key` left L1: stop following its channel. */
  unlink(key: string): void {
    const link = this.links.get(key);
    if (!link) return;
    this.links.delete(key);
    link.dropped = true;
    link.unlisten?.();
  }

  private heard(key: string, link: Link, message: Buffer | null): void {
    const l1 = this.l1;
    if (link.dropped) return;
    if (message === null) {
      // The subscriber closed or reconnected: announcements may have been missed. The copy is
      // no hit until read again, and only reads sent while the channel is live are followed.
      l1.untrust(key);
      link.liveAt = existingSharedSubscriber(this.client)?.isLive(cacheKeys(this.prefix, key).channel) ? monotonicNow() : undefined;
      return;
    }
    const outcome = this.parse(message);
    switch (outcome.kind) {
      case 'value': {
        if (!outcome.stored) return;
        const entry = outcome.entry;
        // It came through the followed channel: every later announcement follows it.
        this.sentAt.set(entry, monotonicNow());
        l1.heard(key, entry.createdAt);
        const left = Math.min(entry.createdAt + entry.ttl - this.now(), entry.ttl);
        if (entry.kind === 1 /* value */ && left > 0) l1.keep(key, entry, left, left + (entry.stale ?? 0));
        return;
      }
      case 'stored':
        if (outcome.createdAt !== undefined) l1.heard(key, outcome.createdAt);
        else l1.untrust(key);
        return;
      case 'deleted':
        l1.heard(key, outcome.at);
        return;
      case 'uncacheable':
      case 'corrupt':
        // The last run's result was not cacheable (a marker may now be stored), or a value this
        // process cannot read was written: ask Redis again.
        l1.untrust(key);
        return;
      default:
        return;
    }
  }
}
