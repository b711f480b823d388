import { InvalidOptionError } from '../shared/errors.js';
import { ACCEPTED_CLIENTS, closeClient, createClientFromUrl, isRedisClient, checkRedisClient, type RedisClient } from './client.js';
import { checkReplicasClient } from './replication.js';

/*
 * The one place where the library takes a `redis` option: checks it, makes a client from a
 * URL, and closes what it made (never a client the application passed in).
 */

/** A Redis client in use, and whether the library made it (from a URL) and so closes it. */
export interface RedisConnection {
  readonly client: RedisClient;
  /** True when the library made the client from a URL. */
  readonly owned: boolean;
  /** Closes the client if the library made it; leaves a client passed in open. */
  close(): Promise<void>;
}

/**
 * Checks a `redis` option (`InvalidOptionError` naming `redis`, or `replicas` when a lead's
 * replicas are asked of a client that cannot send WAIT on the connection that took the lead).
 */
export function checkRedisOption(redis: unknown, withReplicas: boolean, option = 'redis'): void {
  if (redis === undefined) return;
  if (typeof redis === 'string') {
    if (!/^rediss?:\/\//.test(redis)) throw new InvalidOptionError(option, `expected a URL starting with redis:// or rediss://, got ${JSON.stringify(redis)}`);
    return;
  }
  if (!isRedisClient(redis)) throw new InvalidOptionError(option, `expected ${ACCEPTED_CLIENTS}, or a redis:// URL`);
  checkRedisClient(redis);
  if (withReplicas) checkReplicasClient(redis, 'lead');
}

/** The connection of a checked `redis` option: the client passed in, or one made from the URL (owned). */
export function openRedis(redis: RedisClient | string): RedisConnection {
  if (typeof redis !== 'string') return { client: redis, owned: false, close: async () => {} };
  const client = createClientFromUrl(redis);
  let closing: Promise<void> | undefined;
  return { client, owned: true, close: () => (closing ??= closeClient(client)) };
}

/**
 * A connection made from `url`, once it is ready or after `waitMs` (then `onSlow` is told why,
 * and the client goes on connecting by itself): for startups that would rather coordinate
 * through Redis from the first request. The offline queue stays on (see createClientFromUrl).
 */
export async function connectRedis(url: string, waitMs: number, onSlow: (reason: string) => void): Promise<RedisConnection> {
  const connection = openRedis(url);
  const client = connection.client as RedisClient & { once(event: 'ready', fn: () => void): unknown; off(event: 'ready', fn: () => void): unknown; on(event: 'error', fn: (error: Error) => void): unknown };
  let lastError: Error | undefined;
  const onError = (error: Error) => {
    lastError = error;
  };
  client.on('error', onError);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      client.off('ready', ready);
      onSlow(lastError?.message ?? 'no answer');
      resolve();
    }, waitMs);
    const ready = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', ready);
  });
  return connection;
}
