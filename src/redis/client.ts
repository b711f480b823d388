import type { Redis, Cluster } from 'ioredis';

/**
 * The ioredis client the library accepts: a `Redis` or a `Cluster`. Only the commands listed
 * in `CommandClient` are used on it, and the library never closes a client the user passed in.
 */
export type RedisClient = Redis | Cluster;

/** The narrow part of the client that the lock and the store call. */
export type CommandClient = Pick<Redis, 'call' | 'callBuffer'>;

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
