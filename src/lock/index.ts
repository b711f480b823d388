export { RedisLock, lockKeys, type RedisLockOptions } from './redis-lock.js';
export { MemoryLock, MemoryLockRegistry, type MemoryLockOptions } from './memory-lock.js';
export { withLock, type WithLockOptions, type WithLockContext } from './with-lock.js';
export { Subscriber } from '../redis/subscriber.js';
export type { Lock, LockOptions, AcquireOptions } from './types.js';
export type { RedisClient } from '../redis/client.js';
