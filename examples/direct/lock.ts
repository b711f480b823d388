/**
 * The lock under the cache, for your own critical sections: `withLock` and `RedisLock`.
 * With REDIS_URL the locks hold across processes and machines; without it they are
 * in-process `MemoryLock`s with the same interface.
 *
 *   node --import tsx examples/direct/lock.ts
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/direct/lock.ts
 */
import { Redis } from 'ioredis';
import { LockTimeoutError, MemoryLock, RedisLock, withLock } from 'dogpile-guard';

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;

const started = Date.now();
const log = (message: string) => console.log(`${String(Date.now() - started).padStart(5)} ms  ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// 1. Three jobs touch the same account: they take turns. Each acquisition gets a larger
//    fencing token; pass it to the store you write to, so it can reject a stale writer.
log('1. three jobs, one account: they run one at a time');
await Promise.all(
  ['job A', 'job B', 'job C'].map((job) =>
    withLock(
      'account:42',
      async ({ fencingToken }) => {
        log(`   ${job} holds the lock (fencing token ${fencingToken})`);
        await sleep(100);
        log(`   ${job} releases it`);
      },
      { redis, ttl: '5s', timeout: '10s' },
    ),
  ),
);

// 2. A job that only one instance should run: `timeout: 0` tries once, the others skip.
log('2. three instances start the nightly report: one runs it, two skip');
await Promise.all(
  [1, 2, 3].map((instance) =>
    withLock(
      'nightly-report',
      async ({ signal }) => {
        await sleep(100); // long work would check `signal`: it aborts if the lock is lost
        signal.throwIfAborted();
        log(`   instance ${instance} built the report`);
      },
      { redis, ttl: '5s', timeout: 0 },
    ).catch((error: unknown) => {
      if (!(error instanceof LockTimeoutError)) throw error;
      log(`   instance ${instance}: another instance holds the lock, skipped`);
    }),
  ),
);

// 3. By hand: tryAcquire() never waits; release() in finally.
log('3. by hand: tryAcquire, getOwnerId, release');
const lock = redis ? new RedisLock(redis, 'maintenance', { ttl: '10s' }) : new MemoryLock('maintenance', { ttl: '10s' });
const token = await lock.tryAcquire();
if (token === false) {
  log(`   busy: held by ${await lock.getOwnerId()}`);
} else {
  try {
    log(`   acquired (fencing token ${token}), owner ${await lock.getOwnerId()}`);
  } finally {
    await lock.release();
    log('   released');
  }
}

await redis?.quit();
