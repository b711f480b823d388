import { LRUCache } from 'lru-cache';
import type { CommandClient, RedisClient } from '../redis/client.js';
import { publishCommand, pubSubMode } from '../redis/pubsub-mode.js';
import { existingSharedSubscriber, sharedSubscriber } from '../redis/subscriber.js';
import { TAG_INVALIDATE } from './cache-scripts.js';
import { tagKeys } from './key.js';
import { laterStamp, NO_STAMP, parseStamp, type TagStamp } from './tags.js';
import type { TagStamps } from './types.js';

/** Most tags whose stamps a process holds (each one keeps its channel subscribed). */
const HELD_TAGS = 10_000;

interface Held {
  stamp: TagStamp;
  /** True once the stamp was read after the tag's channel was subscribed (and no reconnect since). */
  trusted: boolean;
  /** Bumped by every reconnect of the subscriber: a read that started before it is not trusted. */
  epoch: number;
  subscribed: Promise<void> | undefined;
  unlisten: (() => void) | undefined;
  dropped: boolean;
}

/**
 * Tag stamps in Redis: `P:t:{tag}` holds when the tag was last invalidated, and every
 * invalidation is announced on `P:tc:{tag}` (SPUBLISH on a cluster with sharded pub/sub, so
 * it stays on the tag's shard). A process holds the stamps of the tags it met, subscribed to
 * their channels: it subscribes first and reads after, so no invalidation falls between the
 * two, and merges what it reads and hears by taking the later stamp (they only move forward).
 * After a reconnect of the subscriber a stamp is read again before it is trusted.
 */
export class RedisTagStamps implements TagStamps {
  private readonly held = new LRUCache<string, Held>({
    max: HELD_TAGS,
    dispose: (held) => {
      held.dropped = true;
      held.unlisten?.();
    },
  });

  constructor(
    private readonly client: RedisClient,
    private readonly commands: CommandClient,
    private readonly prefix: string,
  ) {}

  known(tag: string): TagStamp | undefined {
    const held = this.held.get(tag);
    return held?.trusted ? held.stamp : undefined;
  }

  load(tags: readonly string[]): Promise<TagStamp[]> {
    return Promise.all(tags.map((tag) => this.loadOne(tag)));
  }

  /**
   * One time for every tag of the call: the first tag is stamped with the server's time, the
   * others with that same time (on a cluster they live on other shards), so a run that began
   * after the call began is older than none of them.
   */
  async invalidate(tags: readonly string[], stale: boolean, keepFor: number): Promise<void> {
    const pub = publishCommand(await pubSubMode(this.client));
    const keep = Math.max(1, Math.ceil(keepFor));
    const stamp = async (tag: string, at: string): Promise<string> => {
      const keys = tagKeys(this.prefix, tag);
      const [text, stampedAt] = await TAG_INVALIDATE.run(this.commands, [keys.stamp], [at, stale ? '1' : '0', keep, keys.channel, pub]);
      // This process's own stamp moves at once (its announcement follows).
      const held = this.held.peek(tag);
      if (held) held.stamp = laterStamp(held.stamp, parseStamp(String(text)));
      return String(stampedAt);
    };
    const at = await stamp(tags[0]!, '');
    await Promise.all(tags.slice(1).map((tag) => stamp(tag, at)));
  }

  close(): void {
    this.held.clear();
  }

  private async loadOne(tag: string): Promise<TagStamp> {
    let held = this.held.get(tag);
    if (held?.trusted) return held.stamp;
    if (!held) {
      held = { stamp: NO_STAMP, trusted: false, epoch: 0, subscribed: undefined, unlisten: undefined, dropped: false };
      this.held.set(tag, held);
    }
    const h = held;
    const keys = tagKeys(this.prefix, tag);
    h.subscribed ??= sharedSubscriber(this.client)
      .listen(keys.channel, (message) => this.heard(h, message))
      .then(
        (unlisten) => {
          if (h.dropped) unlisten();
          else h.unlisten = unlisten;
        },
        (error: unknown) => {
          h.subscribed = undefined;
          throw error;
        },
      );
    let subscribed = true;
    try {
      await h.subscribed;
    } catch {
      // No subscription (the subscriber connection failed): read the stamp for this read only.
      subscribed = false;
    }
    const epoch = h.epoch;
    const bytes = await this.commands.getBuffer(keys.stamp);
    const read = parseStamp(bytes?.toString('latin1'));
    h.stamp = laterStamp(h.stamp, read);
    // Trusted only while the channel is live: a stamp read while the subscriber is down would not hear the next invalidation.
    if (subscribed && !h.dropped && h.epoch === epoch && existingSharedSubscriber(this.client)?.isLive(keys.channel) === true) h.trusted = true;
    return h.stamp;
  }

  private heard(held: Held, message: Buffer | null): void {
    if (message === null) {
      // Closed or reconnected: an invalidation may have been missed; read the stamp again (once the channel is live) before trusting it.
      held.trusted = false;
      held.epoch++;
      return;
    }
    if (message[0] === 0x74 /* t */) held.stamp = laterStamp(held.stamp, parseStamp(message.toString('latin1', 1)));
  }
}
