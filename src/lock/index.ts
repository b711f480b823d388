export { RedisLock, lockKeys, type RedisLockOptions } from './redis-lock.js';
export { MemoryLock, MemoryLockRegistry, type MemoryLockOptions } from './memory-lock.js';
export { withLock, type WithLockOptions, type WithLockContext } from './with-lock.js';
export { Subscriber } from '../redis/subscriber.js';
export type { Lock, LockOptions, AcquireOptions } from './types.js';
export type { RedisClient, IoRedisLike, CommandClient, CommandArg } from '../redis/client.js';
export type { NodeRedisClient, NodeRedisCluster } from '../redis/node-redis.js';
export type { BaseLock, LockEvents } from './base-lock.js';
