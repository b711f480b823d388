import { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import { SubscriberClosedError } from '../shared/errors.js';

/** Reconnection attempts on one node before the connection moves to another node. */
const ATTEMPTS_PER_NODE = 3;
/** Longest pause before trying the next node (the pause grows with every failed node). */
const MAX_SWITCH_DELAY_MS = 2000;

/**
 * The subscriber connection of a Redis Cluster: one plain connection to one node of the
 * cluster (a PUBLISH on any node reaches the subscribers of every node), moved to another
 * node when its node stays unreachable, and re-subscribed there.
 *
 * It replaces `Cluster.duplicate()` for subscribing: the subscriber built into ioredis's
 * Cluster picks a new node as soon as its connection ends, with no pause, and each attempt
 * adds one more 'close' listener to the socket of the last connection that worked; while no
 * node answers (a cluster outage, or every node restarting) it spins, and the listeners pile
 * up ("MaxListenersExceededWarning: 11 close listeners added to [Socket]"). Here each node is
 * retried with ioredis's own backoff, moves between nodes pause for a growing delay, and a
 * connection that is given up is dropped with all of its listeners.
 *
 * It offers the part of the ioredis interface that `Subscriber` uses: `status`,
 * `subscribe`/`unsubscribe` of one channel, `disconnect`, and the events `messageBuffer`,
 * `ready` (also after a move: messages may have been missed meanwhile), `close` and `error`.
 */
export class ClusterSubscriberConnection extends EventEmitter {
  private connection: Redis | undefined;
  private readonly channels = new Set<string>();
  private nodeIndex = 0;
  private failedNodes = 0;
  private switchTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly cluster: Cluster) {
    super();
    this.open();
  }

  /** 'ready' when subscribed commands are served, 'end' after `disconnect()`, else the node connection's status. */
  get status(): string {
    if (this.closed) return 'end';
    return this.connection?.status ?? 'reconnecting';
  }

  async subscribe(channel: string): Promise<unknown> {
    this.channels.add(channel);
    // Between two nodes: wait for the next connection (it subscribes every channel in the
    // set); subscribing again there resolves once the server confirmed it.
    for (;;) {
      if (this.closed) throw new SubscriberClosedError('subscriber is closed');
      if (this.connection) return this.connection.subscribe(channel);
      await this.nextReady();
    }
  }

  async unsubscribe(channel: string): Promise<unknown> {
    this.channels.delete(channel);
    // Queued by ioredis while the node reconnects, so it is not re-subscribed after.
    return this.connection?.unsubscribe(channel) ?? 0;
  }

  disconnect(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.switchTimer) clearTimeout(this.switchTimer);
    this.switchTimer = undefined;
    this.drop();
    this.emit('close');
  }

  /** Resolves when a connection is ready again (or rejects when this one is closed first). */
  private nextReady(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onReady = () => {
        this.off('close', onClose);
        resolve();
      };
      const onClose = () => {
        if (!this.closed) return; // a node connection closed: the next one may still come
        this.off('ready', onReady);
        this.off('close', onClose);
        reject(new SubscriberClosedError('subscriber is closed'));
      };
      this.once('ready', onReady);
      this.on('close', onClose);
    });
  }

  private open(): void {
    if (this.closed) return;
    const nodes = this.cluster.nodes('master');
    const candidates = nodes.length > 0 ? nodes : this.cluster.nodes('all');
    if (candidates.length === 0) {
      // The cluster client knows no node right now (not connected yet, or every node is gone).
      this.scheduleSwitch();
      return;
    }
    const node = candidates[this.nodeIndex++ % candidates.length]!;
    const connection = node.duplicate({
      lazyConnect: false,
      enableOfflineQueue: true,
      enableReadyCheck: true,
      autoResubscribe: true,
      retryStrategy: (times: number) => (times > ATTEMPTS_PER_NODE ? null : Math.min(times * 100, 1000)),
    });
    this.connection = connection;
    connection.on('messageBuffer', (channel: Buffer, message: Buffer) => this.emit('messageBuffer', channel, message));
    connection.on('ready', () => {
      this.failedNodes = 0;
      this.emit('ready');
    });
    connection.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
    connection.on('close', () => this.emit('close'));
    connection.once('end', () => {
      if (this.connection !== connection) return;
      this.drop();
      this.failedNodes++;
      this.scheduleSwitch();
    });
    // ioredis queues these until the connection is ready (after its handshake and ready check).
    for (const channel of this.channels) connection.subscribe(channel).catch(() => {});
  }

  private scheduleSwitch(): void {
    if (this.closed || this.switchTimer) return;
    const delay = Math.min(100 * 2 ** Math.min(this.failedNodes, 5), MAX_SWITCH_DELAY_MS);
    this.switchTimer = setTimeout(() => {
      this.switchTimer = undefined;
      this.open();
    }, delay);
    this.switchTimer.unref();
  }

  /** Forgets the current node connection: its listeners go with it. */
  private drop(): void {
    const connection = this.connection;
    if (!connection) return;
    this.connection = undefined;
    connection.removeAllListeners();
    connection.on('error', () => {
      /* late socket errors of a connection given up */
    });
    if (connection.status !== 'end') connection.disconnect();
  }
}
