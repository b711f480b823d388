import { LockReplicationError } from '../shared/errors.js';
import type { Duration } from '../shared/duration.js';
import { checkReplicas, checkReplicasClient, DEFAULT_REPLICA_TIMEOUT_MS, waitForReplicas, type Replication, type ReplicasOption } from '../redis/replication.js';
import { asGiven, duration, optionNames, resolveFields, type OptionTable } from '../shared/option-table.js';
import { BaseLock, ownerOf } from './base-lock.js';
import { LOCK_TABLE, redisCall, validateName, validatePrefix } from './common.js';
import { EXTEND } from '../redis/extend-script.js';
import { breaksHashTag, digestId } from '../redis/hash-tag.js';
import { ACQUIRE, FORCE_RELEASE, LEAVE, RELEASE } from './lock-scripts.js';
import { checkRedisClient, commandClient, masterClients, type CommandClient, type RedisClient } from '../redis/client.js';
import { publishCommand, pubSubMode } from '../redis/pubsub-mode.js';
import { existingSharedSubscriber, sharedSubscriber, type Subscriber } from '../redis/subscriber.js';
import { LOCK_DEFAULTS, type LockOptions } from './types.js';
import { abortReason, bounded, Wakeup } from '../shared/wait.js';

export interface RedisLockOptions extends LockOptions {
  /**
   * The subscriber used to wait for releases. By default one duplicate connection per
   * client is shared by all locks on it, opened on the first wait and closed a second after
   * the last wait ends.
   */
  subscriber?: Subscriber;
  /**
   * Replicas that must hold the lock before an acquisition counts, so a failover that
   * promotes a replica cannot hand the lock to someone else: `'majority'` (at least half of
   * the replicas the master has, rounded up; none when it has none), a number, or 0. After
   * the lock is taken, `WAIT` asks the master for that many replicas' confirmation, bounded
   * by `replicaTimeout`; without it the lock is released and the acquisition rejects with
   * `LockReplicationError`.
   * @default 0 (no wait: Redis replication is asynchronous)
   */
  replicas?: ReplicasOption;
  /** Longest `WAIT` for the replicas' confirmation. @default 100 (ms) */
  replicaTimeout?: Duration;
}

/** The options `RedisLock` adds to those of every lock, declared once (docs/lock.md shows the replicas' rows). */
const REDIS_LOCK_ONLY_TABLE = {
  subscriber: { check: asGiven<Subscriber>(), shown: 'one per client', doc: 'the subscriber connection its waiters listen on (else one shared per client)' },
  replicas: { default: 0, check: checkReplicas, shown: '`0`', doc: 'replicas that must hold an acquisition before it counts' },
  replicaTimeout: { default: DEFAULT_REPLICA_TIMEOUT_MS, check: duration, shown: '`100` ms', doc: "longest `WAIT` for the replicas' confirmation" },
};

/** Every option of `RedisLock`. */
export const REDIS_LOCK_TABLE = { ...LOCK_TABLE, ...REDIS_LOCK_ONLY_TABLE } satisfies OptionTable<RedisLockOptions>;

/** The fields of `RedisLockOptions`. */
export const REDIS_LOCK_OPTION_NAMES: readonly string[] = optionNames(REDIS_LOCK_TABLE);

/**
 * The Redis keys and channel of the lock `name`, all with the hash tag `{name}`. A name that
 * starts with `}` would leave that tag empty and scatter the keys over a cluster's slots: it
 * is stored as `#` + its digest instead (which `resetAll` reads back as a name that maps to
 * the same keys).
 */
export function lockKeys(prefix: string, name: string) {
  const lock = `${prefix}:lock:{${breaksHashTag(name) ? digestId(name) : name}}`;
  return { lock, fence: `${lock}:fence`, queue: `${lock}:q`, channel: lock };
}

/** The channel a release publishes to the waiters of `subscriber` on. */
function waiterChannel(channel: string, subscriber: Subscriber): string {
  return `${channel}:w:${subscriber.id}`;
}

/**
 * A distributed lock on Redis.
 *
 * - Acquisition is `SET NX PX` with a random 128-bit token; release and extension run Lua
 *   scripts that check the token, so a holder whose lock expired never deletes or extends
 *   the next holder's lock.
 * - Every acquisition returns a fencing token from a per-name counter that only grows.
 * - Waiting does not poll: a waiter queues itself with its lock value, and the release hands
 *   the lock to the first live waiter outright (sets it to that waiter's value with its TTL,
 *   draws its fencing token) and publishes the token to it, so the waiter holds the lock when
 *   the message arrives, without another round trip, and a caller that was not waiting cannot
 *   overtake the queue. If no wake-up comes (holder crashed, message lost) the waiter retries
 *   when the holder's remaining TTL runs out, and finds the lock free or already its own.
 *
 * The lock is for efficiency, not for the correctness of side effects: a holder paused
 * longer than its TTL can still act after losing the lock. Pass `fencingToken` to the
 * resource you protect if that matters.
 */
export class RedisLock extends BaseLock {
  private readonly client: RedisClient;
  private readonly commands: CommandClient;
  private readonly keys: ReturnType<typeof lockKeys>;
  private readonly subscriber: Subscriber | undefined;
  private readonly replication: Replication | undefined;

  constructor(redis: RedisClient, name: string, options: RedisLockOptions = {}) {
    checkRedisClient(redis);
    super(name, options, REDIS_LOCK_OPTION_NAMES);
    this.client = redis;
    this.commands = commandClient(redis);
    this.keys = lockKeys(this.options.prefix, this.name);
    const { subscriber, replicas, replicaTimeout } = resolveFields(REDIS_LOCK_ONLY_TABLE, options);
    this.subscriber = subscriber;
    this.replication = replicas === 0 ? undefined : { replicas, timeout: replicaTimeout };
    if (this.replication) checkReplicasClient(redis, 'lock');
  }

  /** @internal */
  protected async tryOnce(value: string): Promise<number | false> {
    const [ok, n] = await redisCall(this.name, 'acquire', ACQUIRE.run(this.commands, [this.keys.lock, this.keys.fence, this.keys.queue], [value, this.options.ttl, '', 0]));
    return ok === 1 ? this.replicated(value, n) : false;
  }

  /**
   * With `replicas`: resolves `token` once enough replicas hold the lock; else releases it
   * and rejects with `LockReplicationError`.
   */
  private async replicated(value: string, token: number): Promise<number> {
    if (!this.replication) return token;
    let outcome: { needed: number; confirmed: number };
    try {
      outcome = await redisCall(this.name, 'WAIT', waitForReplicas(this.client, this.keys.lock, this.replication));
    } catch (err) {
      await this.releaseRaw(value).catch(() => {});
      throw err;
    }
    if (outcome.confirmed >= outcome.needed) return token;
    await this.releaseRaw(value).catch(() => {});
    throw new LockReplicationError(
      `the lock "${this.name}" reached ${outcome.confirmed} of the ${outcome.needed} replicas asked for within ${this.replication.timeout} ms; it was released`,
      { key: this.name },
    );
  }

  /** @internal */
  protected async waitFor(value: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<number> {
    // The deadline is this process's (monotonic); the queue entry gets the time left, and the
    // script turns it into a deadline on the server's clock, the one clock all processes share.
    const deadline = performance.now() + timeoutMs;
    // The queue entry carries what a release needs to hand the lock over: this waiter's TTL and value.
    const subscriber = this.subscriber ?? sharedSubscriber(this.client);
    const entry = `${this.options.ttl}@${subscriber.id}|${value}`;
    const handOffPrefix = `${value.slice(0, value.indexOf('|'))} `;
    /** The fencing token a release handed the lock over with, once its message arrived. */
    let handed: number | undefined;
    const wakeup = new Wakeup();
    // A release publishes to this subscriber's own channel of the lock, so it wakes no other
    // process; the lock's shared channel carries only the wake-ups of earlier versions' releases
    // (during a rolling deploy), which name the waiter by its queue entry.
    const listening = subscriber.listenAll([waiterChannel(this.keys.channel, subscriber), this.keys.channel], (message) => {
      if (message === null) return wakeup.wake(); // reconnected: a message may have been missed
      const text = message.toString();
      if (text.startsWith(handOffPrefix)) {
        handed = Number(text.slice(handOffPrefix.length));
        wakeup.wake();
      } else if (text === entry) {
        wakeup.wake(); // an earlier version's release reserved the lock for this waiter (it cannot read the entry)
      }
    });
    // Subscribing is part of the wait: bounded by its deadline and its signal (a subscriber
    // connection that cannot connect or is not answered must not hold acquire() past them).
    const unlisten = await bounded(redisCall(this.name, 'subscribe', listening), { ms: deadline - performance.now(), onTimeout: () => this.throwTimeout(timeoutMs), signal, key: this.name, late: (late) => late() });
    let queued = false;
    try {
      for (;;) {
        // Handed over: held already (also when the signal aborted or the deadline passed since:
        // acquire() then releases it, which passes it on).
        if (handed !== undefined) {
          const token = this.replication ? await this.confirmHanded(value) : handed;
          if (token !== false) {
            queued = false;
            return await this.replicated(value, token);
          }
          handed = undefined; // it ran out before it was confirmed: wait on
        }
        if (signal?.aborted) throw abortReason(signal, this.name);
        const left = Math.ceil(deadline - performance.now());
        if (left <= 0) throw this.timeoutError(timeoutMs);
        // Bounded by the deadline: an answer that comes after acquire() gave up (a Redis that
        // stalled) is undone, the lock released or the queue entry left.
        const [ok, n] = await bounded(redisCall(this.name, 'acquire', ACQUIRE.run(this.commands, [this.keys.lock, this.keys.fence, this.keys.queue], [value, this.options.ttl, entry, left])), {
          ms: left,
          onTimeout: () => this.throwTimeout(timeoutMs),
          signal,
          key: this.name,
          late: ([lateOk]) => void (lateOk === 1 ? this.releaseRaw(value) : this.leave(entry, value)).catch(() => {}),
        });
        if (ok === 1) {
          queued = false;
          return await this.replicated(value, n);
        }
        queued = true;
        // n is the holder's remaining TTL: if no wake-up comes by then, the holder is gone.
        const holderLeft = n >= 0 ? n + 1 : this.options.ttl;
        await wakeup.sleep(Math.min(deadline - performance.now(), holderLeft), signal, this.name);
      }
    } catch (err) {
      // Leaving also passes the lock on if a release handed it to this waiter meanwhile.
      // Not awaited: a Redis that stalls must not hold the rejection past the deadline. It goes out
      // on the connection ahead of whatever this lock sends next; if it is lost, the entry's own
      // deadline (on the server's clock) takes it out of the queue.
      if (queued) void this.leave(entry, value).catch(() => {});
      throw err;
    } finally {
      unlisten();
    }
  }

  /** Leaves the wait queue; passes the lock on if a release handed it to this waiter meanwhile. */
  private async leave(entry: string, value: string): Promise<void> {
    await redisCall(this.name, 'leave', (async () => LEAVE.run(this.commands, [this.keys.queue, this.keys.lock, this.keys.fence], [entry, value, this.keys.channel, await this.publisher()]))());
  }

  /**
   * With `replicas`, a lock handed to this waiter is confirmed with one ACQUIRE (it finds the
   * lock already this waiter's and restarts its TTL) before `WAIT`: `WAIT` counts the writes of
   * the connection it is sent on, and the hand-off was written by the releaser's. Resolves the
   * token, or false when the handed lock ran out first.
   */
  private async confirmHanded(value: string): Promise<number | false> {
    const [ok, n] = await redisCall(this.name, 'acquire', ACQUIRE.run(this.commands, [this.keys.lock, this.keys.fence, this.keys.queue], [value, this.options.ttl, '', 0]));
    return ok === 1 ? n : false;
  }

  /** @internal */
  protected override tryFirst(): boolean {
    const subscriber = this.subscriber ?? existingSharedSubscriber(this.client);
    return !subscriber?.isLive(waiterChannel(this.keys.channel, subscriber));
  }

  /** @internal */
  protected async extendRaw(value: string, ms: number): Promise<boolean> {
    return (await redisCall(this.name, 'extend', EXTEND.run(this.commands, [this.keys.lock], [value, ms]))) === 1;
  }

  /** @internal */
  protected async releaseRaw(value: string): Promise<boolean> {
    const released = (async () => RELEASE.run(this.commands, [this.keys.lock, this.keys.queue, this.keys.fence], [value, this.keys.channel, await this.publisher()]))();
    return (await redisCall(this.name, 'release', released)) === 1;
  }

  /** The command the scripts wake waiters with: SPUBLISH on a cluster with sharded pub/sub, else PUBLISH. */
  private async publisher(): Promise<string> {
    return publishCommand(await pubSubMode(this.client));
  }

  async getOwnerId(): Promise<string | null> {
    return ownerOf(await redisCall(this.name, 'GET', this.commands.get(this.keys.lock)));
  }

  /**
   * Deletes the lock `name` whoever holds it and wakes a waiter. The fencing counter is kept,
   * so tokens stay monotonic. Use with care: the old holder still believes it holds the lock
   * until its next renewal.
   */
  static async reset(redis: RedisClient, name: string, options: { prefix?: string } = {}): Promise<boolean> {
    const keys = lockKeys(validatePrefix(options.prefix ?? LOCK_DEFAULTS.prefix), validateName(name));
    const released = (async () => FORCE_RELEASE.run(commandClient(redis), [keys.lock, keys.queue, keys.fence], [keys.channel, publishCommand(await pubSubMode(redis))]))();
    return (await redisCall(name, 'reset', released)) === 1;
  }

  /**
   * Deletes every lock under the prefix, taken literally (SCAN, never KEYS; every master of a
   * cluster) and wakes their waiters. Meant for application start-up after a crash. Returns how
   * many locks were deleted.
   */
  static async resetAll(redis: RedisClient, options: { prefix?: string } = {}): Promise<number> {
    const prefix = validatePrefix(options.prefix ?? LOCK_DEFAULTS.prefix);
    checkRedisClient(redis);
    const nodes = await masterClients(redis);
    let count = 0;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = (await redisCall(`${prefix}:*`, 'SCAN', node.call('SCAN', cursor, 'MATCH', `${globLiteral(prefix)}:lock:{*`, 'COUNT', 500))) as [string | Buffer, (string | Buffer)[]];
        cursor = String(next);
        for (const raw of keys) {
          const key = String(raw);
          if (!key.endsWith('}')) continue; // fence counters and queues
          const name = key.slice(`${prefix}:lock:{`.length, -1);
          if (await RedisLock.reset(redis, name, { prefix })) count++;
        }
      } while (cursor !== '0');
    }
    return count;
  }
}

/** `text` as a Redis glob (`SCAN MATCH`) that matches exactly it: `*`, `?`, `[`, `]` and `\` escaped. */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
