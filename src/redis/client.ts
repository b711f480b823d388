import { createRequire } from 'node:module';
import type { Redis, Cluster } from 'ioredis';
import { InvalidOptionError } from '../shared/errors.js';
import type { CommandClient } from './commands.js';
import { closeNodeRedis, isNodeRedis, isNodeRedisCluster, NodeRedisCommands, nodeRedisMasters, type NodeRedis, type NodeRedisClient, type NodeRedisCluster } from './node-redis.js';

/** An ioredis (v5, v6) or iovalkey `Redis` or `Cluster`: one interface, typed here as ioredis 5's. */
export type IoRedisClient = Redis | Cluster;

/**
 * What the public types ask of an ioredis-like client: the members the library uses. It is
 * structural, so that ioredis 5 and 6 and iovalkey (separate packages with their own class
 * declarations) all fit; at run time every one of them is used as ioredis 5's interface.
 */
export interface IoRedisLike extends CommandClient {
  readonly status: string;
  evalsha(...args: any[]): Promise<unknown>;
  duplicate(...args: any[]): unknown;
  subscribe(...args: any[]): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(...args: any[]): void;
  on(event: string | symbol, listener: (...args: any[]) => void): unknown;
  once(event: string | symbol, listener: (...args: any[]) => void): unknown;
  off(event: string | symbol, listener: (...args: any[]) => void): unknown;
}

/**
 * The Redis clients the library accepts: ioredis 5 and 6 or iovalkey (`Redis`, `Cluster`), and
 * node-redis 5 and 6 (`createClient()`, `createCluster()`). Only the commands listed in
 * `CommandClient` are sent on it, and the library never closes a client the user passed in.
 */
export type RedisClient = IoRedisLike | NodeRedisClient | NodeRedisCluster;

/** What the `redis` options say they accept (the error message of a wrong value). */
export const ACCEPTED_CLIENTS =
  'an ioredis or iovalkey Redis or Cluster instance, or a node-redis client (createClient() or createCluster())';

export type { CommandArg, CommandClient } from './commands.js';

export function isRedisClient(value: unknown): value is RedisClient {
  return isIoRedis(value) || isNodeRedis(value);
}

/**
 * Why a client passed in cannot be used as it is, or undefined. A node-redis client (or cluster)
 * that was never connected, or was closed, has `isOpen` false and fails every command: the
 * cache would answer `degraded` forever. One still connecting (`connect()` called, not yet
 * ready) is accepted; ioredis and iovalkey clients connect by themselves.
 */
function unconnectedClientProblem(client: RedisClient): string | undefined {
  if (!isNodeRedis(client) || client.isOpen) return undefined;
  return 'the node-redis client is not connected (its isOpen is false): call await client.connect() before createCache or RedisLock';
}

/** Checks a client passed in (`InvalidOptionError` naming `redis`): one of `ACCEPTED_CLIENTS`, and connected (`unconnectedClientProblem`). */
export function checkRedisClient(redis: unknown): asserts redis is RedisClient {
  if (!isRedisClient(redis)) throw new InvalidOptionError('redis', `expected ${ACCEPTED_CLIENTS}`);
  const unconnected = unconnectedClientProblem(redis);
  if (unconnected !== undefined) throw new InvalidOptionError('redis', unconnected);
}

function isIoRedis(value: unknown): value is IoRedisLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Redis).evalsha === 'function' &&
    typeof (value as Redis).duplicate === 'function' &&
    typeof (value as Redis).subscribe === 'function'
  );
}

export function isCluster(client: RedisClient | IoRedisClient): client is Cluster {
  return !isNodeRedis(client) && typeof (client as Cluster).nodes === 'function' && (client as { isCluster?: boolean }).isCluster === true;
}

/** True for a cluster client of either library (keys of different slots cannot share a command). */
export function isAnyCluster(client: RedisClient): boolean {
  return isNodeRedis(client) ? isNodeRedisCluster(client) : isCluster(client);
}

/** The commands of any accepted client: an ioredis-like client as it is, node-redis through an adapter. */
const commandClients = new WeakMap<object, CommandClient>();
export function commandClient(client: RedisClient): CommandClient {
  if (!isNodeRedis(client)) return client;
  let commands = commandClients.get(client);
  if (!commands) {
    commands = new NodeRedisCommands(client);
    commandClients.set(client, commands);
  }
  return commands;
}

/** The masters to SCAN (every master of a cluster, else the client itself). */
export async function masterClients(client: RedisClient): Promise<CommandClient[]> {
  if (isNodeRedis(client)) return nodeRedisMasters(client);
  const io = client as IoRedisClient;
  return isCluster(io) ? io.nodes('master') : [io];
}

/**
 * False while the client is known to be disconnected (ioredis: reconnecting or closed;
 * node-redis: closed, or open but not ready after it was ready once); a client still
 * connecting for the first time is given its chance.
 */
const readyOnce = new WeakSet<object>();
export function clientAvailable(client: RedisClient): boolean {
  if (isNodeRedis(client)) {
    if (!client.isOpen) return false;
    const ready = (client as { isReady?: boolean }).isReady ?? true;
    if (ready) readyOnce.add(client);
    return ready || !readyOnce.has(client);
  }
  const status = client.status;
  return status !== 'reconnecting' && status !== 'close' && status !== 'end';
}

/** Closes a client the library created. */
export async function closeClient(client: RedisClient): Promise<void> {
  if (isNodeRedis(client)) return closeNodeRedis(client);
  await client.quit().then(
    () => undefined,
    () => client.disconnect(),
  );
}

/**
 * A client for a `redis://` or `rediss://` URL: ioredis when it is installed, else node-redis
 * (`redis`); both are optional peer dependencies, loaded only here. With ioredis the offline
 * queue stays on so the first calls wait for the connection instead of failing (and a
 * subscriber duplicated while it connects can still SUBSCRIBE); callers bound every call
 * themselves. node-redis queues commands while it connects the same way. Errors are reported
 * by the calls that fail, so the client's own `error` events are absorbed here.
 */
export function createClientFromUrl(url: string): RedisClient {
  const require = createRequire(import.meta.url);
  let ioredis: typeof import('ioredis') | undefined;
  try {
    ioredis = require('ioredis') as typeof import('ioredis');
  } catch {
    ioredis = undefined;
  }
  if (ioredis) {
    const client = new ioredis.Redis(url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {
      /* reported through the calls that fail */
    });
    return client;
  }
  let nodeRedis: { createClient(options: { url: string }): NodeRedis & { on(event: string, fn: () => void): unknown } };
  try {
    nodeRedis = require('redis') as typeof nodeRedis;
  } catch (cause) {
    throw new InvalidOptionError('redis', 'a Redis URL needs the ioredis or the redis (node-redis) package: npm install ioredis', { cause });
  }
  const client = nodeRedis.createClient({ url });
  client.on('error', () => {
    /* reported through the calls that fail */
  });
  client.connect().catch(() => {
    /* it reconnects by itself; calls fail meanwhile */
  });
  return client;
}
