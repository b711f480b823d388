import { randomBytes } from 'node:crypto';
import type { ClusterSubscriberConnection } from './cluster-connection.js';
import { ShardedSubscriberConnection } from './sharded-connection.js';
import type { Cluster, Redis } from 'ioredis';
import { isCluster, type IoRedisClient, type RedisClient } from './client.js';
import { isNodeRedis, NodeRedisSubscriberConnection } from './node-redis.js';
import { SubscriberClosedError } from '../shared/errors.js';

/**
 * Called with a message, or with `null` when messages may have been lost: the connection
 * closed (`isLive` is then false until it is back) or came back.
 */
type ChannelListener = (message: Buffer | null) => void;

/**
 * Removes a listener. The channel, once it has no listener left, stays subscribed for its
 * linger (a busy key's next wait pays no SUBSCRIBE), or is unsubscribed `atOnce` (a follower
 * that bounds how many channels it holds lets one go to make room).
 */
export type Unlisten = (atOnce?: boolean) => void;

interface ChannelState {
  listeners: Set<ChannelListener>;
  ready: Promise<void>;
  /** True once the server confirmed the subscription. */
  live: boolean;
  /** Set while the channel has no listener and waits `linger` ms before unsubscribing. */
  idleTimer: NodeJS.Timeout | undefined;
  /** How long it stays subscribed once its last listener left. */
  linger: number;
}

/** How long a channel stays subscribed after its last listener left (a busy lock or key keeps it). */
export const CHANNEL_LINGER_MS = 1000;
/** The longest a channel waited on again and again lingers (its linger doubles at each return). */
const CHANNEL_LINGER_MAX_MS = 60_000;
/** How many dropped channels' lingers are remembered (to grow them when they come back). */
const LINGER_MEMORY = 10_000;

/**
 * One Redis connection in subscriber mode, shared by every waiter of a cache or a lock.
 * Channel subscriptions are reference-counted: a channel is subscribed when its first
 * listener arrives and unsubscribed `CHANNEL_LINGER_MS` after its last one leaves (a lock or
 * key under contention keeps its subscription instead of paying SUBSCRIBE/UNSUBSCRIBE per
 * wait); a channel that comes back within twice its linger of being dropped lingers twice
 * as long the next time, up to `CHANNEL_LINGER_MAX_MS` (a hot key refreshed on a cycle keeps it). After a reconnect
 * (ioredis re-subscribes by itself; on the connection the library makes, the subscriber does,
 * once the server confirms) every listener is called with `null`, since a message may have
 * been published meanwhile.
 */
interface SubscriberOptions {
  owned: boolean;
  lingerMs?: number;
  onIdle?: () => void;
  onError?: (err: Error) => void;
  /** Where dropped channels' lingers are remembered (kept across subscribers of one client). */
  lingerHistory?: Map<string, { linger: number; at: number }>;
}

/** What a `Subscriber` listens on: an ioredis client, the sharded or node connections of a cluster, or a node-redis duplicate. */
type PubSubConnection = IoRedisClient | ClusterSubscriberConnection | ShardedSubscriberConnection | NodeRedisSubscriberConnection;

export class Subscriber {
  /** @internal A random name of this subscriber (base64url, no `|`): a lock's release publishes to its waiters here, on their own channel. */
  readonly id = randomBytes(6).toString('base64url');
  private readonly channels = new Map<string, ChannelState>();
  /**
   * Channels dropped lately: their linger, and when (monotonic ms) they were dropped. A channel
   * subscribed again within twice its linger of being dropped (a hot key refreshed every few seconds,
   * a busy lock) lingers twice as long next time, up to `CHANNEL_LINGER_MAX_MS`: its
   * SUBSCRIBE/UNSUBSCRIBE pair is paid once instead of at every wait.
   */
  private readonly dropped: Map<string, { linger: number; at: number }>;
  private connectedOnce = false;
  private closed = false;
  /** True from the connection's `close` until its next `ready`: nothing published meanwhile reaches this process. */
  private down = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  /** The next try of a refused resubscription (see resubscribe). */
  private retryTimer: NodeJS.Timeout | undefined;
  /** The end of the connection's handshake, while channels wait for it (see handshakeDone). */
  private handshake: Promise<void> | undefined;

  /**
   * A subscriber on `connection`, an ioredis or iovalkey client of its own (it enters subscriber
   * mode): give it to `RedisLock`s as their `subscriber` to share one connection among them.
   * `owned`: `close()` closes the connection too.
   */
  constructor(connection: Redis | Cluster, options: { owned: boolean; lingerMs?: number; onError?: (err: Error) => void });
  /** @internal Any connection the package subscribes on; `onIdle` and `lingerHistory` serve the shared subscribers. */
  constructor(connection: PubSubConnection, options: SubscriberOptions);
  constructor(
    private readonly connection: PubSubConnection,
    private readonly options: SubscriberOptions,
  ) {
    this.dropped = options.lingerHistory ?? new Map();
    connection.on('messageBuffer', this.onMessage);
    connection.on('ready', this.onReady);
    connection.on('close', this.onClose);
    connection.on('error', this.onError);
    if (connection.status === 'ready') this.connectedOnce = true;
  }

  /** Number of channels currently subscribed. */
  get channelCount(): number {
    return this.channels.size;
  }

  /**
   * @internal Adds a listener and resolves once the channel subscription is confirmed by the server,
   * so a message published after that cannot be missed. Returns the function that removes it.
   */
  async listen(channel: string, listener: ChannelListener): Promise<Unlisten> {
    if (this.closed) throw new SubscriberClosedError('subscriber is closed');
    this.cancelLinger();
    let state = this.channels.get(channel);
    if (!state) {
      const created: ChannelState = { listeners: new Set(), ready: Promise.resolve(), live: false, idleTimer: undefined, linger: this.lingerFor(channel) };
      created.ready = this.handshakeDone()
        .then(() => this.connection.subscribe(channel) as Promise<unknown>)
        .then(() => {
          created.live = true;
        });
      state = created;
      this.channels.set(channel, state);
    }
    if (state.idleTimer) {
      clearTimeout(state.idleTimer);
      state.idleTimer = undefined;
    }
    state.listeners.add(listener);
    const current = state;
    let removed = false;
    const remove = (atOnce = false) => {
      if (removed) return;
      removed = true;
      current.listeners.delete(listener);
      if (current.listeners.size > 0 || this.channels.get(channel) !== current) return;
      if (atOnce) {
        if (current.idleTimer) clearTimeout(current.idleTimer);
        this.drop(channel, current);
      } else if (!current.idleTimer) {
        current.idleTimer = setTimeout(() => this.drop(channel, current), current.linger);
        current.idleTimer.unref();
      }
    };
    try {
      await current.ready;
    } catch (err) {
      remove();
      throw err;
    }
    return remove;
  }

  /**
   * @internal `listen` on each of `channels` with one listener: resolves once every subscription is
   * confirmed; when one fails, the others are removed again and its error is thrown.
   */
  async listenAll(channels: readonly string[], listener: ChannelListener): Promise<Unlisten> {
    const results = await Promise.allSettled(channels.map((channel) => this.listen(channel, listener)));
    const added = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const unlisten: Unlisten = (atOnce) => {
      for (const remove of added) remove(atOnce);
    };
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      unlisten();
      throw failed.reason;
    }
    return unlisten;
  }

  /**
   * @internal True when `channel` is subscribed and the connection is up right now, so a publish on it
   * reaches this process. False from the moment the connection closes until it is back.
   */
  isLive(channel: string): boolean {
    return !this.down && this.channels.get(channel)?.live === true;
  }

  /** The linger of a channel being subscribed: doubled when it comes back within twice its linger of being dropped. */
  private lingerFor(channel: string): number {
    const last = this.dropped.get(channel);
    if (last === undefined) return CHANNEL_LINGER_MS;
    this.dropped.delete(channel);
    // Within twice its linger, not once: a key refreshed every second, whose process leads
    // every other refresh (and so waits only every other one), is dropped a linger after its
    // last wait and comes back a little more than a linger later.
    return performance.now() - last.at <= 2 * last.linger ? Math.min(CHANNEL_LINGER_MAX_MS, last.linger * 2) : CHANNEL_LINGER_MS;
  }

  private drop(channel: string, state: ChannelState): void {
    state.idleTimer = undefined;
    if (state.listeners.size > 0 || this.channels.get(channel) !== state) return;
    this.channels.delete(channel);
    if (this.dropped.size >= LINGER_MEMORY) this.dropped.delete(this.dropped.keys().next().value!);
    this.dropped.set(channel, { linger: state.linger, at: performance.now() });
    if (!this.closed) {
      state.ready
        .then(() => this.connection.unsubscribe(channel))
        .catch(() => {
          /* the connection is gone; so is the subscription */
        });
    }
    if (this.channels.size === 0) this.scheduleLinger();
  }

  /** Closes the connection if this subscriber created it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.cancelLinger();
    clearTimeout(this.retryTimer);
    this.connection.off('messageBuffer', this.onMessage);
    this.connection.off('ready', this.onReady);
    this.connection.off('close', this.onClose);
    for (const state of this.channels.values()) {
      if (state.idleTimer) clearTimeout(state.idleTimer);
      for (const l of state.listeners) l(null);
    }
    this.channels.clear();
    if (this.options.owned) {
      this.connection.disconnect();
      this.connection.off('error', this.onError);
    }
  }

  /**
   * ioredis writes SUBSCRIBE at once while a connection is in its handshake (status `connect`),
   * before its own CLIENT SETINFO and INFO ready check; if the SUBSCRIBE is answered first,
   * those are refused in subscriber mode, ioredis treats the failed ready check as fatal,
   * rejects the pending commands and reconnects. So wait for the handshake to end. In every
   * other state ioredis queues the command until the connection is ready.
   */
  private handshakeDone(): Promise<void> {
    const connection = this.connection;
    if (connection.status !== 'connect') return Promise.resolve();
    // One wait for every channel subscribed meanwhile, not a pair of listeners per channel.
    this.handshake ??= new Promise((resolve) => {
      const done = () => {
        connection.off('ready', done);
        connection.off('close', done);
        this.handshake = undefined;
        resolve();
      };
      connection.on('ready', done);
      connection.on('close', done);
    });
    return this.handshake;
  }

  private scheduleLinger(): void {
    if (!this.options.onIdle) return;
    const linger = this.options.lingerMs ?? 0;
    if (linger <= 0) {
      this.options.onIdle();
      return;
    }
    this.lingerTimer = setTimeout(() => {
      this.lingerTimer = undefined;
      if (this.channels.size === 0) this.options.onIdle?.();
    }, linger);
    this.lingerTimer.unref();
  }

  private cancelLinger(): void {
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  private readonly onMessage = (channel: Buffer, message: Buffer) => {
    const state = this.channels.get(channel.toString());
    if (!state) return;
    for (const l of [...state.listeners]) l(message);
  };

  private readonly onReady = () => {
    if (!this.connectedOnce) {
      this.down = false;
      this.connectedOnce = true;
      return;
    }
    if (!this.resubscribes()) {
      this.down = false;
      for (const state of this.channels.values()) for (const l of [...state.listeners]) l(null);
      return;
    }
    this.resubscribe();
  };

  /**
   * Subscribes the channels again after a reconnect, on a connection that does not do it by
   * itself (see sharedSubscriber): they are live once the server confirms them. A refusal
   * tries again a second later while the connection stays up; the connection dropping again
   * leaves them down until its next `ready`.
   */
  private resubscribe(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const connection = this.connection as IoRedisClient;
    const channels = [...this.channels.keys()];
    const confirmed = channels.length === 0 ? Promise.resolve() : (connection.subscribe(...channels) as Promise<unknown>);
    confirmed.then(
      () => {
        if (this.closed || connection.status !== 'ready') return;
        this.down = false;
        for (const state of this.channels.values()) for (const l of [...state.listeners]) l(null);
      },
      () => {
        if (this.closed || connection.status !== 'ready') return;
        this.retryTimer = setTimeout(() => this.resubscribe(), RESUBSCRIBE_RETRY_MS);
        this.retryTimer.unref();
      },
    );
  }

  /** True for an ioredis connection made without `autoResubscribe`: this subscriber subscribes its channels again after a reconnect. */
  private resubscribes(): boolean {
    return (this.connection as { options?: { autoResubscribe?: boolean } }).options?.autoResubscribe === false;
  }

  /**
   * The connection closed (killed, the server gone, a reconnect under way): every listener
   * hears `null` at once, with `isLive` false, so nothing that relies on hearing of changes
   * (an L1 copy, a tag stamp) is trusted until the connection is back and says so (`ready`).
   */
  private readonly onClose = () => {
    if (this.closed || this.down) return;
    this.down = true;
    for (const state of this.channels.values()) for (const l of [...state.listeners]) l(null);
  };

  private readonly onError = (err: Error) => {
    this.options.onError?.(err);
  };
}

/** How long after a refused resubscription the subscriber tries again. */
const RESUBSCRIBE_RETRY_MS = 1000;

const shared = new WeakMap<RedisClient, Subscriber>();
/** The lingers of the channels a client's shared subscribers dropped (a subscriber closes when idle; the next one keeps learning). */
const lingerHistories = new WeakMap<RedisClient, Map<string, { linger: number; at: number }>>();

/** The shared subscriber of `client` if one is open (never creates one). */
export function existingSharedSubscriber(client: RedisClient): Subscriber | undefined {
  return shared.get(client);
}

/**
 * The subscriber shared by every `RedisLock` on `client` that was not given one: a duplicate
 * connection, opened on the first wait and closed a moment after the last wait ends.
 */
export function sharedSubscriber(client: RedisClient): Subscriber {
  let sub = shared.get(client);
  if (!sub) {
    // The subscriber keeps its own offline queue whatever the client's setting: a SUBSCRIBE
    // sent while the new connection is still connecting must wait for it, not fail. On a
    // cluster it is one connection per master owning a subscribed channel (sharded pub/sub),
    // or one connection to one node on servers without it; never a duplicate Cluster (see
    // ClusterSubscriberConnection for why).
    const connection = isNodeRedis(client)
      ? new NodeRedisSubscriberConnection(client)
      : isCluster(client)
        ? new ShardedSubscriberConnection(client)
        : // ioredis's own subscribing again after a reconnect is a promise nobody can catch: when
          // the connection drops again first (Redis restarting, paused, refusing), its rejection
          // would end the process. The subscriber does it instead (onReady).
          (client as unknown as Redis).duplicate({ enableOfflineQueue: true, autoResubscribe: false });
    const created: Subscriber = new Subscriber(connection, {
      owned: true,
      lingerMs: 500,
      lingerHistory: lingerHistory(client),
      onIdle: () => {
        if (shared.get(client) === created) shared.delete(client);
        created.close();
      },
    });
    sub = created;
    shared.set(client, sub);
  }
  return sub;
}

function lingerHistory(client: RedisClient): Map<string, { linger: number; at: number }> {
  let history = lingerHistories.get(client);
  if (!history) {
    history = new Map();
    lingerHistories.set(client, history);
  }
  return history;
}
