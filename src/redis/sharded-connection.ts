import { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import { ClusterSubscriberConnection } from './cluster-connection.js';
import { keySlot, pubSubMode } from './pubsub-mode.js';
import { SubscriberClosedError } from '../shared/errors.js';

/** Reconnection attempts on one node before its channels move to the slot's current master. */
const ATTEMPTS_PER_NODE = 3;
/** Pause between two attempts to place a channel whose slot has no known master (failover in progress). */
const ROUTE_RETRY_MS = 200;
/** Longest wait for the cluster client to refresh its slot table. */
const REFRESH_BOUND_MS = 2000;

interface NodeConnection {
  key: string;
  redis: Redis;
  channels: Set<string>;
  readyOnce: boolean;
  /**
   * False when the node answered ROLE as a replica: asked in the same write as the first
   * SSUBSCRIBE on the connection (see `ssubscribeOn`).
   */
  isMaster: Promise<boolean> | undefined;
}

/**
 * The subscriber connection of a Redis Cluster with sharded pub/sub (Redis ≥ 7): each channel
 * is subscribed with SSUBSCRIBE on the master that owns its slot (the scripts that publish run
 * on that master and SPUBLISH there), so a wake-up goes over the cluster bus only to that
 * shard's replicas, not to every node. One plain
 * connection per master that had a subscribed channel since the subscriber opened.
 *
 * Subscriptions follow the slots: when a node's connection ends for good (a master killed and
 * its replica promoted), a SSUBSCRIBE is answered MOVED (a slot moved), or the node ends the
 * subscriptions itself (it was demoted to a replica, or the slot migrated), the slot table is
 * refreshed and the channels are subscribed on their new masters; then `ready` is emitted, so
 * `Subscriber` tells every listener that messages may have been missed. A channel is only kept
 * on a node that says it is a master: the slot table can still name a master demoted a moment
 * ago, which accepts the SSUBSCRIBE but hears nothing until its new master counts it as a replica.
 *
 * On a cluster without sharded pub/sub (Redis < 7, detected once per client, see
 * `pubSubMode`) it is a `ClusterSubscriberConnection`: SUBSCRIBE on one node.
 *
 * It offers what `Subscriber` uses: `status`, `subscribe` / `unsubscribe` of one channel,
 * `disconnect`, and the events `messageBuffer`, `ready`, `close` and `error`.
 */
export class ShardedSubscriberConnection extends EventEmitter {
  private readonly nodes = new Map<string, NodeConnection>();
  private readonly channelNode = new Map<string, NodeConnection>();
  private plain: ClusterSubscriberConnection | undefined;
  private closed = false;
  /** Channels subscribed and not unsubscribed since (the ones a relocation moves). */
  private readonly wanted = new Set<string>();
  /** Pending pauses and bounded waits, settled at once by `disconnect()`. */
  private readonly timers = new Map<NodeJS.Timeout, () => void>();

  constructor(private readonly cluster: Cluster) {
    super();
  }

  get status(): string {
    if (this.closed) return 'end';
    return this.plain?.status ?? 'ready';
  }

  async subscribe(channel: string): Promise<unknown> {
    const mode = await pubSubMode(this.cluster);
    if (this.closed) throw new SubscriberClosedError('subscriber is closed');
    if (mode === 'plain') return this.plainConnection().subscribe(channel);
    this.wanted.add(channel);
    return this.route(channel);
  }

  async unsubscribe(channel: string): Promise<unknown> {
    if (this.plain) return this.plain.unsubscribe(channel);
    this.wanted.delete(channel);
    const node = this.channelNode.get(channel);
    this.channelNode.delete(channel);
    if (!node) return 0;
    node.channels.delete(channel);
    // The node's connection stays open for the next wait on that shard; the whole connection
    // closes with the subscriber, a moment after its last wait.
    return node.redis.sunsubscribe(channel);
  }

  disconnect(): void {
    if (this.closed) return;
    this.closed = true;
    for (const [timer, settle] of this.timers) {
      clearTimeout(timer);
      settle();
    }
    this.timers.clear();
    for (const node of [...this.nodes.values()]) this.dropNode(node);
    this.channelNode.clear();
    this.plain?.disconnect();
    this.emit('close');
  }

  private plainConnection(): ClusterSubscriberConnection {
    if (!this.plain) {
      const plain = new ClusterSubscriberConnection(this.cluster);
      for (const event of ['messageBuffer', 'ready', 'close', 'error'] as const) {
        plain.on(event, (...args: unknown[]) => {
          if (event === 'error' && this.listenerCount('error') === 0) return;
          this.emit(event, ...args);
        });
      }
      this.plain = plain;
    }
    return this.plain;
  }

  /** Subscribes `channel` on the master of its slot, following moves until the server confirms it. */
  private async route(channel: string): Promise<unknown> {
    const slot = keySlot(channel);
    for (;;) {
      if (this.closed) throw new SubscriberClosedError('subscriber is closed');
      if (!this.wanted.has(channel)) return 0;
      const key = this.cluster.slots[slot]?.[0];
      const node = key === undefined ? undefined : this.node(key);
      if (!node) {
        await this.refreshSlots();
        await this.pause(ROUTE_RETRY_MS);
        continue;
      }
      const previous = this.channelNode.get(channel);
      if (previous && previous !== node) previous.channels.delete(channel);
      this.channelNode.set(channel, node);
      node.channels.add(channel);
      const outcome = await this.ssubscribeOn(node, channel);
      if (outcome === 'ok') return 1;
      if (outcome === 'replica') {
        // The slot table is behind a failover: give the cluster a moment and ask again. The
        // connection goes; a pending subscription on it hears 'end' and is routed again too.
        this.dropNode(node);
        await this.refreshSlots();
        await this.pause(ROUTE_RETRY_MS);
        continue;
      }
      // The node is gone or no longer owns the slot: learn the new owner, try again there.
      await this.refreshSlots();
    }
  }

  /**
   * SSUBSCRIBE on `node` once it is ready; 'moved' when the node ended or answered MOVED,
   * 'replica' when it is no master any more.
   *
   * A master demoted by a failover serves SSUBSCRIBE for its new master's slots, as any
   * replica does, so the subscription succeeds; but a SPUBLISH reaches a replica only once its
   * master counts it as one, a while after the failover, and a wake-up published meanwhile is
   * lost. So the first SSUBSCRIBE on a connection goes in one write with a ROLE (a connection
   * in subscriber mode cannot ask), and a node answering as a replica is left for the slot's
   * real master. ROLE refused (an ACL without it) counts as master: the slot table decides.
   */
  private ssubscribeOn(node: NodeConnection, channel: string): Promise<'ok' | 'moved' | 'replica'> {
    const redis = node.redis;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: 'ok' | 'moved' | 'replica') => {
        if (settled) return;
        settled = true;
        redis.off('moved', onMoved);
        redis.off('end', onMoved);
        resolve(outcome);
      };
      const onMoved = () => finish('moved');
      redis.on('moved', onMoved);
      redis.on('end', onMoved);
      const send = () => {
        if (settled) return;
        node.isMaster ??= redis.call('ROLE').then(
          (reply) => !(Array.isArray(reply) && ['slave', 'replica'].includes(String(reply[0]))),
          () => true,
        );
        const isMaster = node.isMaster;
        redis.ssubscribe(channel).then(
          () => isMaster.then((master) => finish(master ? 'ok' : 'replica')),
          () => finish('moved'),
        );
      };
      // SSUBSCRIBE written during the handshake would break ioredis's ready check (see Subscriber).
      if (redis.status === 'ready') send();
      else redis.once('ready', send);
    });
  }

  /** The connection to the node `key`, opened on first use; undefined when the client does not know that node. */
  private node(key: string): NodeConnection | undefined {
    const existing = this.nodes.get(key);
    if (existing) return existing;
    const source = this.cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === key);
    if (!source) return undefined;
    const redis = source.duplicate({
      lazyConnect: false,
      enableOfflineQueue: true,
      enableReadyCheck: true,
      autoResubscribe: true,
      retryStrategy: (times: number) => (times > ATTEMPTS_PER_NODE ? null : Math.min(times * 100, 1000)),
    });
    const node: NodeConnection = { key, redis, channels: new Set(), readyOnce: false, isMaster: undefined };
    this.nodes.set(key, node);
    redis.on('smessageBuffer', (channel: Buffer, message: Buffer) => this.emit('messageBuffer', channel, message));
    redis.on('error', (err: Error) => {
      // A master that lost a slot (demoted by a failover, or the slot migrated) ends the
      // sharded subscriptions of that slot with a SUNSUBSCRIBE nobody asked for; ioredis has
      // no command waiting for it and reports this error. The node keeps its connection,
      // but the channels must move.
      if (/Command queue state error.*sunsubscribe/is.test(err.message)) {
        this.relocate(node);
        return;
      }
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
    redis.on('ready', () => {
      // Back on the same node after a blip: ioredis re-subscribed; messages may have been missed.
      if (node.readyOnce) this.emit('ready');
      node.readyOnce = true;
    });
    // A node's connection closed: what it carried is not heard until it is back (`ready`).
    redis.on('close', () => {
      if (!this.closed && node.channels.size > 0) this.emit('close');
    });
    redis.on('moved', () => this.relocate(node));
    redis.once('end', () => this.relocate(node));
    return node;
  }

  /** `node` ended or lost a slot: its channels go to their current masters, then listeners hear `ready`. */
  private relocate(node: NodeConnection): void {
    if (this.closed || this.nodes.get(node.key) !== node) return;
    const channels = [...node.channels];
    this.dropNode(node);
    if (channels.length === 0) return;
    void (async () => {
      await this.refreshSlots();
      await Promise.all(
        channels.map((channel) => (this.wanted.has(channel) && !this.channelNode.has(channel) ? this.route(channel).catch(() => {}) : undefined)),
      );
      if (!this.closed) this.emit('ready');
    })();
  }

  private dropNode(node: NodeConnection): void {
    if (this.nodes.get(node.key) === node) this.nodes.delete(node.key);
    for (const channel of node.channels) if (this.channelNode.get(channel) === node) this.channelNode.delete(channel);
    const redis = node.redis;
    // A pending ssubscribeOn() on this node hears 'end' and routes its channel again.
    redis.emit('end');
    redis.removeAllListeners();
    redis.on('error', () => {
      /* late socket errors of a connection given up */
    });
    if (redis.status !== 'end') redis.disconnect();
  }

  /** Asks the cluster client to reload its slot table; resolves when done, or after REFRESH_BOUND_MS. */
  private refreshSlots(): Promise<void> {
    const waited = this.pause(REFRESH_BOUND_MS);
    this.cluster.refreshSlotsCache(() => this.settlePauses(waited));
    return waited;
  }

  private pause(ms: number): Promise<void> & { timer?: NodeJS.Timeout } {
    let timer: NodeJS.Timeout | undefined;
    const promise: Promise<void> & { timer?: NodeJS.Timeout } = new Promise<void>((resolve) => {
      const settle = () => {
        if (timer) this.timers.delete(timer);
        resolve();
      };
      timer = setTimeout(settle, ms);
      this.timers.set(timer, settle);
    });
    promise.timer = timer;
    return promise;
  }

  private settlePauses(pause: { timer?: NodeJS.Timeout }): void {
    const timer = pause.timer;
    if (!timer) return;
    const settle = this.timers.get(timer);
    clearTimeout(timer);
    settle?.();
  }
}
