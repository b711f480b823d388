import { EventEmitter } from 'node:events';
import type { CommandArg, CommandClient } from './commands.js';
import { SubscriberClosedError } from '../shared/errors.js';

/**
 * node-redis (`redis` v5 and v6) behind the library's narrow client interface. Only the shape
 * is described here, so the package stays optional and its types are not needed to compile.
 */
export interface NodeRedisClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  // The argument and reply types of node-redis are generic over its modules and RESP version.
  sendCommand(args: any, options?: any): Promise<any>;
  duplicate(...args: any[]): any;
  connect(): Promise<unknown>;
  // Both are EventEmitters ('ready', 'error', 'end', ...).
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
}

/** A node-redis cluster client (`createCluster`). */
export interface NodeRedisCluster {
  readonly isOpen: boolean;
  readonly masters: readonly unknown[];
  nodeClient(node: any): Promise<any>;
  sendCommand(firstKey: any, isReadonly: any, args: any, options?: any): Promise<any>;
  duplicate(...args: any[]): any;
  connect(): Promise<unknown>;
  // Both are EventEmitters ('ready', 'error', 'end', ...).
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
}

export type NodeRedis = NodeRedisClient | NodeRedisCluster;

export function isNodeRedis(value: unknown): value is NodeRedis {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return 'isOpen' in v && typeof v.sendCommand === 'function' && typeof v.duplicate === 'function' && typeof v.connect === 'function';
}

export function isNodeRedisCluster(value: NodeRedis): value is NodeRedisCluster {
  return 'masters' in value && typeof (value as NodeRedisCluster).nodeClient === 'function';
}

/** RESP type code of bulk strings ('$'): mapped to Buffers where replies must stay binary. */
const BLOB_STRING = 36;
const AS_BUFFERS = { typeMapping: { [BLOB_STRING]: Buffer } };

const arg = (a: CommandArg): string | Buffer => (typeof a === 'number' ? String(a) : a);

/** The key a command is routed by on a cluster: the first key of a script, else the first argument. */
function firstKey(command: string, args: readonly CommandArg[]): string | Buffer | undefined {
  const upper = command.toUpperCase();
  if (upper === 'EVAL' || upper === 'EVALSHA') return Number(args[1]) > 0 ? arg(args[2]!) : undefined;
  return args.length > 0 ? arg(args[0]!) : undefined;
}

/** The commands of `CommandClient`, sent through node-redis's `sendCommand`. */
export class NodeRedisCommands implements CommandClient {
  constructor(private readonly client: NodeRedis) {}

  private send(command: string, args: readonly CommandArg[], options?: object): Promise<unknown> {
    const full = [command, ...args.map(arg)];
    if (isNodeRedisCluster(this.client)) return this.client.sendCommand(firstKey(command, args), false, full, options);
    return this.client.sendCommand(full, options);
  }

  call(command: string, ...args: CommandArg[]): Promise<unknown> {
    return this.send(command, args);
  }

  callBuffer(command: string, ...args: CommandArg[]): Promise<unknown> {
    return this.send(command, args, AS_BUFFERS);
  }

  async get(key: string): Promise<string | null> {
    const reply = await this.send('GET', [key]);
    return reply === null ? null : String(reply);
  }

  async getBuffer(key: string): Promise<Buffer | null> {
    return (await this.send('GET', [key], AS_BUFFERS)) as Buffer | null;
  }

  set(key: string, value: Buffer, px: 'PX', ms: number): Promise<unknown> {
    return this.send('SET', [key, value, px, ms]);
  }

  async del(key: string): Promise<number> {
    return Number(await this.send('DEL', [key]));
  }
}

/** The command clients of every master (one for a single server), for SCAN. */
export async function nodeRedisMasters(client: NodeRedis): Promise<CommandClient[]> {
  if (!isNodeRedisCluster(client)) return [new NodeRedisCommands(client)];
  const nodes = await Promise.all(client.masters.map((m) => client.nodeClient(m) as Promise<NodeRedisClient>));
  return nodes.map((n) => new NodeRedisCommands(n));
}

/** Closes a node-redis client the library created (v5/v6 `close`, older `quit`), or drops it. */
export async function closeNodeRedis(client: NodeRedis): Promise<void> {
  const c = client as unknown as { close?: () => Promise<unknown>; quit?: () => Promise<unknown>; destroy?: () => void; disconnect?: () => Promise<unknown> };
  try {
    if (!client.isOpen) return;
    if (c.close) await c.close();
    else if (c.quit) await c.quit();
  } catch {
    if (c.destroy) c.destroy();
    else await c.disconnect?.().catch(() => {});
  }
}

/** node-redis's error replies (`ErrorReply` and its subclasses): the server answered with an error. */
export function isNodeRedisReplyError(error: Error): boolean {
  let proto: unknown = Object.getPrototypeOf(error);
  while (proto && proto !== Error.prototype) {
    if ((proto as { constructor?: { name?: string } }).constructor?.name === 'ErrorReply') return true;
    proto = Object.getPrototypeOf(proto);
  }
  return false;
}

/**
 * The subscriber connection of a node-redis client or cluster: a duplicate, connected here,
 * offering what `Subscriber` uses of a connection: `status`, `subscribe`/`unsubscribe` of one
 * channel, `disconnect`, and the events `messageBuffer`, `ready` (after a reconnect too:
 * node-redis re-subscribes by itself, and messages may have been missed meanwhile), `close`
 * and `error`.
 */
export class NodeRedisSubscriberConnection extends EventEmitter {
  private readonly connection: any;
  private readonly connecting: Promise<void>;
  private closed = false;

  constructor(source: NodeRedis) {
    super();
    this.connection = source.duplicate();
    this.connection.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
    this.connection.on('ready', () => this.emit('ready'));
    this.connection.on('end', () => this.emit('close'));
    // A dropped connection that node-redis is re-opening: nothing published meanwhile arrives.
    this.connection.on('reconnecting', () => this.emit('close'));
    this.connecting = (this.connection.connect() as Promise<unknown>).then(
      () => undefined,
      () => undefined,
    );
  }

  /** 'ready' when subscriptions are served, 'end' after `disconnect()`, else 'reconnecting'. */
  get status(): string {
    if (this.closed) return 'end';
    return this.connection.isReady === true || (this.connection.isReady === undefined && this.connection.isOpen) ? 'ready' : 'reconnecting';
  }

  private readonly onMessage = (message: Buffer, channel: Buffer) => {
    this.emit('messageBuffer', Buffer.isBuffer(channel) ? channel : Buffer.from(String(channel)), message);
  };

  async subscribe(channel: string): Promise<unknown> {
    await this.connecting;
    if (this.closed) throw new SubscriberClosedError('subscriber is closed');
    return this.connection.subscribe(channel, this.onMessage, true);
  }

  async unsubscribe(channel: string): Promise<unknown> {
    if (this.closed || !this.connection.isOpen) return 0;
    return this.connection.unsubscribe(channel, this.onMessage, true);
  }

  disconnect(): void {
    if (this.closed) return;
    this.closed = true;
    const connection = this.connection;
    void this.connecting.then(() => {
      if (!connection.isOpen) return;
      if (typeof connection.destroy === 'function') connection.destroy();
      else void connection.disconnect().catch(() => {});
    });
    this.emit('close');
  }
}
