import { createRequire } from 'node:module';
import type { Redis, Cluster } from 'ioredis';
import { InvalidOptionError } from '../shared/errors.js';

/**
 * The ioredis client the library accepts: a `Redis` or a `Cluster`. Only the commands listed
 * in `CommandClient` are used on it, and the library never closes a client the user passed in.
 */
export type RedisClient = Redis | Cluster;

export type CommandArg = string | number | Buffer;

/**
 * The narrow part of the client that the lock and the store call: exactly these commands.
 * ioredis' `Redis` and `Cluster` both fit it as they are.
 */
export interface CommandClient {
  call(command: string, ...args: CommandArg[]): Promise<unknown>;
  /** Like `call`, but bulk replies come back as Buffers. */
  callBuffer(command: string, ...args: CommandArg[]): Promise<unknown>;
  get(key: string): Promise<string | null>;
  getBuffer(key: string): Promise<Buffer | null>;
  set(key: string, value: Buffer, px: 'PX', ms: number): Promise<unknown>;
  del(key: string): Promise<number>;
}

export function isRedisClient(value: unknown): value is RedisClient {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Redis).evalsha === 'function' &&
    typeof (value as Redis).duplicate === 'function' &&
    typeof (value as Redis).subscribe === 'function'
  );
}

export function isCluster(client: RedisClient): client is Cluster {
  return typeof (client as Cluster).nodes === 'function' && (client as { isCluster?: boolean }).isCluster === true;
}

/**
 * A client for a `redis://` or `rediss://` URL (ioredis is an optional peer dependency: loaded
 * only here). The offline queue stays on so the first calls wait for the connection instead
 * of failing (and a subscriber duplicated while it connects can still SUBSCRIBE); callers
 * bound every call themselves. Errors are reported by the calls that fail, so the client's
 * own `error` events are absorbed here.
 */
export function createClientFromUrl(url: string): Redis {
  let mod: typeof import('ioredis');
  try {
    mod = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
  } catch (cause) {
    throw new InvalidOptionError('redis', 'a Redis URL needs the ioredis package: npm install ioredis', { cause });
  }
  const client = new mod.Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {
    /* reported through the calls that fail */
  });
  return client;
}
