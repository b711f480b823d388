import { beforeAll, describe, expect, it, vi } from 'vitest';
import net from 'node:net';
import { Redis as IORedis, type Redis } from 'ioredis';
import {
  RedisLock,
  lockKeys,
  MemoryLock,
  MemoryLockRegistry,
  withLock,
  LockTimeoutError,
  LockLostError,
  LockAlreadyHeldError,
  LockNotHeldError,
  InvalidOptionError,
  AbortedError,
  errors,
  type Lock,
} from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import type { RedisClient } from '../src/redis/client.js';
import { RedisServer, startRedis } from '../tools/redis-server.js';
import { Subscriber } from '../src/redis/subscriber.js';

const server = useRedis();
/** For inspection: an ioredis connection. */
let redis: Redis;
/** What the locks run on: the client selected by DOGPILE_TEST_CLIENT (see tools/test-client.ts). */
let lib: RedisClient;

beforeAll(async () => {
  redis = server.client();
  lib = await server.libraryClient();
});

const backends: [string, (name: string, opts?: any) => Lock][] = [
  ['RedisLock', (name, opts) => new RedisLock(lib, name, opts)],
  ['MemoryLock', (name, opts) => new MemoryLock(name, { registry: memRegistry, ...opts })],
];
const memRegistry = new MemoryLockRegistry();
let n = 0;
const uniq = (s: string) => `${s}-${++n}`;

/** Resolves once `count` waiters are queued for the lock `name` (in Redis; a MemoryLock waiter queues within a tick). */
async function queuedOn(label: string, name: string, count = 1): Promise<void> {
  if (label !== 'RedisLock') return new Promise((r) => setTimeout(r, 30));
  while ((await redis.zcard(lockKeys('dogpile', name).queue)) < count) await new Promise((r) => setTimeout(r, 5));
}

/** Scripts run so far on the test server (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const stats = await redis.info('commandstats');
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return calls;
}

describe.each(backends)('%s', (_label, make) => {
  it('excludes a second holder and hands over on release with increasing fencing tokens', async () => {
    const name = uniq('basic');
    const a = make(name);
    const b = make(name);
    const t1 = await a.acquire();
    expect(t1).toBeGreaterThan(0);
    expect(a.isHeld).toBe(true);
    expect(await b.tryAcquire()).toBe(false);
    const waiting = b.acquire({ timeout: 5000 });
    await new Promise((r) => setTimeout(r, 30));
    expect(await a.release()).toBe(true);
    const t2 = await waiting;
    expect(t2).toBe(t1 + 1);
    expect(await b.release()).toBe(true);
    expect(await a.release()).toBe(false);
  });

  it('a reset hands the lock to the first waiter: a caller that was not waiting cannot take it first', async () => {
    const name = uniq('reset-handoff');
    const a = make(name, { id: 'a' });
    const b = make(name, { id: 'b' });
    const c = make(name, { id: 'c' });
    const tokenA = await a.acquire();
    const waiting = b.acquire({ timeout: 5000 });
    waiting.catch(() => {});
    await queuedOn(_label, name);
    const reset = _label === 'RedisLock' ? RedisLock.reset(lib, name) : Promise.resolve(MemoryLock.reset(name, { registry: memRegistry }));
    // Started in the same tick as the reset. Regression (MemoryLock): the reset freed the lock and
    // only woke the waiter, so this synchronous attempt took it first.
    const stolen = c.tryAcquire();
    expect(await reset).toBe(true);
    expect(await stolen).toBe(false);
    expect(await waiting).toBe(tokenA + 1);
    expect(await c.getOwnerId()).toBe('b');
    expect(await a.release()).toBe(false);
    expect(await b.release()).toBe(true);
  });

  it('times out with LockTimeoutError, tries once with timeout 0, and can be acquired again after', async () => {
    const name = uniq('timeout');
    const a = make(name);
    const b = make(name);
    await a.acquire();
    await expect(b.acquire({ timeout: 0 })).rejects.toBeInstanceOf(LockTimeoutError);
    const err = await b.acquire({ timeout: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect((err as LockTimeoutError).code).toBe('E_LOCK_TIMEOUT');
    expect((err as LockTimeoutError).key).toBe(name);
    await a.release();
    expect(await b.acquire({ timeout: 0 })).toBeGreaterThan(0);
    await b.release();
    expect(await b.tryAcquire()).not.toBe(false);
    await b.release();
  });

  it('aborts a wait through the signal and leaves nothing behind', async () => {
    const name = uniq('abort');
    const a = make(name);
    const b = make(name);
    await a.acquire();
    const ac = new AbortController();
    const p = b.acquire({ timeout: 10_000, signal: ac.signal });
    setTimeout(() => ac.abort(), 20);
    await expect(p).rejects.toBeInstanceOf(AbortedError);
    const reason = new Error('custom');
    const ac2 = new AbortController();
    ac2.abort(reason);
    await expect(b.acquire({ signal: ac2.signal })).rejects.toBe(reason);
    await a.release();
    expect(await b.tryAcquire()).not.toBe(false);
    await b.release();
  });

  it('bounds acquire({ timeout }) on the monotonic clock: a wall clock stepped back an hour does not stretch it', async () => {
    const name = uniq('clock-step');
    const holder = make(name); // renewed, so it never frees the lock by itself
    const waiter = make(name);
    await holder.acquire();
    const realNow = Date.now.bind(Date);
    const started = performance.now();
    const waiting = waiter.acquire({ timeout: 1000 }).then(
      () => 'acquired',
      (err: unknown) => err,
    );
    await new Promise((r) => setTimeout(r, 100));
    const step = vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 3_600_000);
    try {
      // Without the fix the wait runs on until the holder lets go; bound the test itself.
      let watchdog: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([waiting, new Promise((r) => (watchdog = setTimeout(r, 8000, 'still waiting')))]);
      clearTimeout(watchdog);
      expect(outcome).toBeInstanceOf(LockTimeoutError);
      expect(performance.now() - started).toBeLessThan(4000);
    } finally {
      step.mockRestore();
      await holder.release();
      await waiting;
      await waiter.release();
    }
  });

  it('rejects acquiring an object twice and extending a lock it does not hold', async () => {
    const a = make(uniq('twice'));
    await a.acquire();
    await expect(a.acquire()).rejects.toBeInstanceOf(LockAlreadyHeldError);
    await a.release();
    await expect(a.extend(1000)).rejects.toBeInstanceOf(LockNotHeldError);
  });

  it('reports the owner id', async () => {
    const name = uniq('owner');
    const a = make(name, { id: 'worker-7' });
    const b = make(name);
    expect(await b.getOwnerId()).toBeNull();
    await a.acquire();
    expect(await b.getOwnerId()).toBe('worker-7');
    await a.release();
    expect(await b.getOwnerId()).toBeNull();
  });

  it('without renewal, signal aborts with LockLostError when the TTL runs out, and the next holder is safe', async () => {
    const name = uniq('expire');
    const a = make(name, { ttl: 80, autoRenew: false });
    const b = make(name);
    await a.acquire();
    const lost = new Promise<unknown>((resolve) => a.signal.addEventListener('abort', () => resolve(a.signal.reason)));
    expect(await lost).toBeInstanceOf(LockLostError);
    const tb = await b.acquire({ timeout: 2000 });
    expect(await a.release()).toBe(false);
    expect(b.isHeld).toBe(true);
    expect(await b.getOwnerId()).not.toBeNull();
    await expect(a.extend()).rejects.toBeInstanceOf(LockNotHeldError);
    expect(tb).toBeGreaterThan(0);
    await b.release();
  });

  it('keeps a short-TTL lock alive with auto-renewal', async () => {
    const name = uniq('renew');
    // Not shorter: an event loop that stalls for 2/3 of the TTL (a busy machine) loses the lock.
    const a = make(name, { ttl: 300 });
    const b = make(name);
    await a.acquire();
    await new Promise((r) => setTimeout(r, 1000));
    expect(a.signal.aborted).toBe(false);
    expect(await b.tryAcquire()).toBe(false);
    await a.release();
  });

  it('withLock releases in finally when fn throws and passes the fencing token', async () => {
    const name = uniq('with');
    const seen: number[] = [];
    const opts = _label === 'RedisLock' ? { redis: lib } : { registry: memRegistry };
    await expect(
      withLock(name, ({ fencingToken }) => {
        seen.push(fencingToken);
        throw new Error('boom');
      }, opts),
    ).rejects.toThrow('boom');
    const result = await withLock(name, ({ fencingToken, signal }) => {
      seen.push(fencingToken);
      expect(signal.aborted).toBe(false);
      return 42;
    }, opts);
    expect(result).toBe(42);
    expect(seen[1]).toBe(seen[0]! + 1);
    expect(await make(name).tryAcquire()).not.toBe(false);
  });

  it('supports await using', async () => {
    const name = uniq('dispose');
    {
      await using lock = make(name);
      await lock.acquire();
      expect(await make(name).tryAcquire()).toBe(false);
    }
    const again = make(name);
    expect(await again.tryAcquire()).not.toBe(false);
    await again.release();
  });

  it('validates names and TTLs before sending anything', () => {
    expect(() => make('')).toThrow(InvalidOptionError);
    expect(() => make(42 as unknown as string)).toThrow(/name/);
    for (const ttl of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 'soon']) {
      expect(() => make('x', { ttl })).toThrow(/Invalid ttl/);
    }
  });
});

describe('RedisLock specifics', () => {
  it('stores namespaced keys with a shared hash tag and no leftover waiter queue', async () => {
    const lock = new RedisLock(lib, 'ns-test', { prefix: 'app' });
    await lock.acquire();
    expect(await redis.exists('app:lock:{ns-test}')).toBe(1);
    expect(await redis.get('app:lock:{ns-test}:fence')).toBe(String(lock.fencingToken));
    await lock.release();
    expect(await redis.exists('app:lock:{ns-test}')).toBe(0);
  });

  it('a contended acquisition costs two commands: the waiter\'s queuing ACQUIRE and the RELEASE that hands the lock over', async () => {
    const name = 'two-commands';
    const [a, b, c] = ['a', 'b', 'c'].map((id) => new RedisLock(lib, name, { id, autoRenew: false }));
    const tokenA = await a!.acquire();
    const waitingB = b!.acquire({ timeout: 5000 });
    await queuedOn('RedisLock', name, 1);
    // While b waits, the lock's channel is live on this client, so c queues with its first command.
    const beforeC = await scriptCalls();
    const waitingC = c!.acquire({ timeout: 5000 });
    await queuedOn('RedisLock', name, 2);
    expect((await scriptCalls()) - beforeC).toBe(1);
    const before = await scriptCalls();
    expect(await a!.release()).toBe(true);
    expect(await waitingB).toBe(tokenA + 1);
    expect(await b!.release()).toBe(true);
    expect(await waitingC).toBe(tokenA + 2);
    // The two RELEASEs and nothing else. Regression: each woken waiter sent an ACQUIRE of its own
    // to take the lock reserved for it (4 here, 3 per contended acquisition).
    expect((await scriptCalls()) - before).toBe(2);
    expect(await c!.release()).toBe(true);
  });

  it("a hand-off is published on the waiter's own subscriber channel: it wakes that waiter's connection and no other", async () => {
    const name = 'targeted-wakeup';
    const keys = lockKeys('dogpile', name);
    const watch = redis.duplicate();
    const published: string[] = [];
    watch.on('pmessage', (_pattern: string, channel: string, message: string) => published.push(`${channel} ${message}`));
    await watch.psubscribe(`${keys.channel}*`);
    const connections = [redis.duplicate(), redis.duplicate()];
    const heard = [0, 0];
    connections.forEach((c, i) => c.on('messageBuffer', () => heard[i]!++));
    const [subB, subC] = connections.map((c) => new Subscriber(c, { owned: true }));
    try {
      const a = new RedisLock(lib, name, { autoRenew: false });
      const b = new RedisLock(lib, name, { id: 'b', autoRenew: false, subscriber: subB });
      const c = new RedisLock(lib, name, { id: 'c', autoRenew: false, subscriber: subC });
      const token = await a.acquire();
      const waitingB = b.acquire({ timeout: 5000 });
      await queuedOn('RedisLock', name, 1);
      const waitingC = c.acquire({ timeout: 5000 });
      await queuedOn('RedisLock', name, 2);
      expect(await a.release()).toBe(true);
      expect(await waitingB).toBe(token + 1);
      const holderB = (await redis.get(keys.lock))!.split('|')[0];
      expect(published).toEqual([`${keys.channel}:w:${subB!.id} ${holderB} ${token + 1}`]);
      // C's connection heard nothing of B's hand-off (before: every waiting process was woken).
      expect(heard).toEqual([1, 0]);
      expect(await b.release()).toBe(true);
      expect(await waitingC).toBe(token + 2);
      expect(heard).toEqual([1, 1]);
      expect(published).toHaveLength(2);
      expect(published[1]!.startsWith(`${keys.channel}:w:${subC!.id} `)).toBe(true);
      await c.release();
    } finally {
      watch.disconnect();
      await Promise.all([subB!.close(), subC!.close()]);
    }
  });

  it('hands over to and from waiters of the earlier protocol (a reservation "~<entry>" and a bare wake-up), as in a rolling upgrade', async () => {
    const name = 'mixed-versions';
    const keys = lockKeys('dogpile', name);
    const sub = redis.duplicate();
    const messages: string[] = [];
    sub.on('message', (_channel: string, message: string) => messages.push(message));
    await sub.subscribe(keys.channel);
    try {
      // An earlier version's waiter (its queue entry is a bare id) is reserved the lock and woken.
      const a = new RedisLock(lib, name);
      await a.acquire();
      const [seconds] = await redis.time();
      await redis.zadd(keys.queue, Number(seconds) * 1000 + 60_000, 'f00dfeedcafe0001');
      expect(await a.release()).toBe(true);
      expect(await redis.get(keys.lock)).toBe('~f00dfeedcafe0001');
      while (messages.length === 0) await new Promise((r) => setTimeout(r, 5));
      expect(messages).toEqual(['f00dfeedcafe0001']);
      await redis.del(keys.lock);
      // A waiter of the version before the subscriber channels (entry "<ttl>|<value>", listening
      // on the lock's channel) is handed the lock there.
      const b = new RedisLock(lib, name);
      await b.acquire();
      messages.length = 0;
      await redis.zadd(keys.queue, Number(seconds) * 1000 + 60_000, '30000|0123abcd|earlier-waiter');
      expect(await b.release()).toBe(true);
      expect(await redis.get(keys.lock)).toBe('0123abcd|earlier-waiter');
      expect(Number(await redis.pttl(keys.lock))).toBeGreaterThan(20_000);
      while (messages.length === 0) await new Promise((r) => setTimeout(r, 5));
      expect(messages).toEqual([`0123abcd ${await redis.get(keys.fence)}`]);
      await redis.del(keys.lock);
      // A waiter of this version is woken by an earlier version's release and takes its reservation.
      const holder = new RedisLock(lib, name, { autoRenew: false });
      const waiter = new RedisLock(lib, name, { id: 'new-waiter', autoRenew: false });
      await holder.acquire();
      const waiting = waiter.acquire({ timeout: 5000 });
      await queuedOn('RedisLock', name);
      const [entry] = await redis.zrange(keys.queue, 0, 0);
      await redis.set(keys.lock, `~${entry}`, 'PX', 1000);
      await redis.zrem(keys.queue, entry!);
      await redis.publish(keys.channel, entry!);
      expect(await waiting).toBeGreaterThan(0);
      expect(await waiter.getOwnerId()).toBe('new-waiter');
      expect(await waiter.release()).toBe(true);
    } finally {
      sub.disconnect();
    }
  });

  it('never releases or extends the lock of the next holder (wrong-owner release)', async () => {
    // A's lock is taken from it on the server (as an expiry would) while A's own expiry timer
    // has not fired: A still believes it holds the lock, so its release() and extend() go to
    // the server, and only the scripts' token check stands between them and B's lock.
    const key = 'dogpile:lock:{wrong-owner}';
    const b = new RedisLock(lib, 'wrong-owner', { ttl: 5000 });

    const a1 = new RedisLock(lib, 'wrong-owner', { ttl: 60_000, autoRenew: false });
    await a1.acquire();
    await redis.del(key);
    await b.acquire({ timeout: 0 });
    const bValue = await redis.get(key);
    expect(a1.isHeld).toBe(true);
    expect(await a1.release()).toBe(false);
    expect(await redis.get(key)).toBe(bValue);
    await b.release();

    const a2 = new RedisLock(lib, 'wrong-owner', { ttl: 60_000, autoRenew: false });
    await a2.acquire();
    await redis.del(key);
    await b.acquire({ timeout: 0 });
    const bValue2 = await redis.get(key);
    expect(a2.isHeld).toBe(true);
    await expect(a2.extend(100)).rejects.toBeInstanceOf(LockLostError);
    expect(a2.isHeld).toBe(false);
    expect(await redis.get(key)).toBe(bValue2);
    // B's expiry is its own 5 s, not the 100 ms A asked for.
    expect(await redis.pttl(key)).toBeGreaterThan(1000);
    expect(await b.release()).toBe(true);
    expect(await redis.exists(key)).toBe(0);
  });

  it('reset and resetAll free held locks and wake waiters', async () => {
    const a = new RedisLock(lib, 'reset-me');
    const b = new RedisLock(lib, 'reset-me');
    await a.acquire();
    const waiting = b.acquire({ timeout: 5000 });
    await new Promise((r) => setTimeout(r, 30));
    expect(await RedisLock.reset(lib, 'reset-me')).toBe(true);
    await waiting;
    expect(b.isHeld).toBe(true);
    const c = new RedisLock(lib, 'reset-other');
    await c.acquire();
    expect(await RedisLock.resetAll(lib)).toBeGreaterThanOrEqual(2);
    expect(await redis.exists('dogpile:lock:{reset-me}', 'dogpile:lock:{reset-other}')).toBe(0);
    expect(await redis.exists('dogpile:lock:{reset-me}:fence')).toBe(1);
    await a.release();
    await b.release();
    await c.release();
  });

  it('fencing tokens never go back, also when Redis restarts empty or loses the counter', async () => {
    const own = await startRedis();
    try {
      const tokensOf = async (client: RedisClient, count: number) => {
        const tokens: number[] = [];
        for (let i = 0; i < count; i++) {
          const lock = new RedisLock(client, 'fenced');
          tokens.push(await lock.acquire());
          await lock.release();
        }
        return tokens;
      };
      const before = await tokensOf(await own.libraryClient(), 3);
      expect(before[1]).toBe(before[0]! + 1);
      expect(before[2]).toBe(before[1]! + 1);
      await own.restart(); // nothing is persisted: the counter is gone
      const after = await tokensOf(await own.libraryClient(), 2);
      expect(after[0]).toBeGreaterThan(before[2]!);
      expect(after[1]).toBe(after[0]! + 1);
      // the counter alone is lost (evicted, deleted): still no step back
      await own.client().del('dogpile:lock:{fenced}:fence');
      const evicted = await tokensOf(await own.libraryClient(), 1);
      expect(evicted[0]).toBeGreaterThan(after[1]!);
      expect(Number.isSafeInteger(evicted[0])).toBe(true);
    } finally {
      await own.stop();
    }
  });

  it('reports a lock lost after a whole TTL without renewal even when the wall clock steps back', async () => {
    const own = await startRedis();
    const realNow = Date.now.bind(Date);
    let step: { mockRestore(): void } | undefined;
    try {
      const lock = new RedisLock(await own.libraryClient(), 'renew-clock', { ttl: 600 });
      await lock.acquire();
      const lost = new Promise<unknown>((resolve) => lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)));
      own.freeze(); // renewals go unanswered
      step = vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 3_600_000);
      let watchdog: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([lost, new Promise((r) => (watchdog = setTimeout(r, 8000, 'still held')))]);
      clearTimeout(watchdog);
      expect(outcome).toBeInstanceOf(LockLostError);
      expect(lock.isHeld).toBe(false);
    } finally {
      step?.mockRestore();
      own.thaw();
      await own.stop();
    }
  });

  it('rejects an object that is no accepted client, saying which clients are accepted', async () => {
    for (const wrong of [{}, { get: () => null }, 'redis://127.0.0.1:1']) {
      expect(() => new RedisLock(wrong as never, 'x')).toThrow(InvalidOptionError);
      expect(() => new RedisLock(wrong as never, 'x')).toThrow(/Invalid redis: expected an ioredis or iovalkey Redis or Cluster instance, or a node-redis client \(createClient\(\) or createCluster\(\)\)/);
    }
    await expect(withLock('x', () => 1, { redis: {} as never })).rejects.toThrow(/node-redis client/);
  });

  it('replicas: rejects a bad value naming the option; waits only where replicas exist', async () => {
    for (const bad of [-1, 1.5, 'all', null, 101]) {
      expect(() => new RedisLock(redis, 'r', { replicas: bad as never })).toThrow(InvalidOptionError);
      expect(() => new RedisLock(redis, 'r', { replicas: bad as never })).toThrow(/Invalid replicas/);
    }
    expect(() => new RedisLock(redis, 'r', { replicas: 1, replicaTimeout: -5 })).toThrow(/Invalid replicaTimeout/);
    // A server without replicas: 'majority' of none is none, so the lock is taken at once.
    const majority = new RedisLock(redis, 'replicas-majority', { replicas: 'majority', autoRenew: false });
    expect(await majority.acquire()).toBeGreaterThan(0);
    await majority.release();
    // One replica asked for and none there: released, and reported.
    const one = new RedisLock(redis, 'replicas-one', { replicas: 1, replicaTimeout: 20, autoRenew: false });
    await expect(one.acquire()).rejects.toBeInstanceOf(errors.LockReplicationError);
    await expect(one.tryAcquire()).rejects.toThrow(/reached 0 of the 1 replicas/);
    expect(await one.getOwnerId()).toBeNull();
  });

  it('replicas: a lock handed to a waiter counts only once a replica holds the hand-off (confirmed on the waiter\'s connection, then WAIT)', async () => {
    const master = await startRedis();
    const replica = new RedisServer();
    try {
      await master.command('CONFIG', 'SET', 'repl-diskless-sync-delay', '0'); // sync at once, not after 5 s
      await replica.start();
      await replica.command('REPLICAOF', master.host, master.port);
      /** Resolves once the replica has acknowledged everything the master wrote so far. */
      const replicaCaughtUp = async () => {
        for (;;) {
          const info = String(await master.command('INFO', 'replication'));
          const acked = /slave0:.*state=online,offset=(\d+)/.exec(info)?.[1];
          if (acked !== undefined && acked === /master_repl_offset:(\d+)/.exec(info)?.[1]) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const name = 'replicated-handoff';
      const keys = lockKeys('dogpile', name);
      const inspect = master.client();
      // Long enough for a replica that answers on a busy machine; the frozen one never does.
      const options = { replicas: 1, replicaTimeout: 5000, autoRenew: false };
      const holder = new RedisLock(master.client(), name, options);
      const waiter = new RedisLock(master.client(), name, { ...options, id: 'waiter' });

      // The replica stops after it acknowledged the waiter's queue entry, before the hand-off:
      // WAIT on the waiter's own writes so far would answer 1 at once.
      const tokenHolder = await holder.acquire();
      const impatient = new RedisLock(master.client(), name, { ...options, replicaTimeout: 300 });
      const unconfirmed = impatient.acquire({ timeout: 10_000 }).catch((err: unknown) => err);
      while ((await inspect.zcard(keys.queue)) < 1) await new Promise((r) => setTimeout(r, 5));
      await replicaCaughtUp();
      replica.freeze();
      try {
        expect(await holder.release()).toBe(true);
        expect(await unconfirmed).toBeInstanceOf(errors.LockReplicationError);
        expect(await inspect.exists(keys.lock)).toBe(0); // released again, nobody else waits
      } finally {
        replica.thaw();
      }
      await replicaCaughtUp();

      // With the replica answering, the hand-off counts once it is on the replica.
      await holder.acquire();
      const waiting = waiter.acquire({ timeout: 10_000 });
      while ((await inspect.zcard(keys.queue)) < 1) await new Promise((r) => setTimeout(r, 5));
      expect(await holder.release()).toBe(true);
      expect(await waiting).toBeGreaterThan(tokenHolder + 2);
      expect(await replica.command('GET', keys.lock)).toBe(await inspect.get(keys.lock));
      expect(await waiter.getOwnerId()).toBe('waiter');
      expect(await waiter.release()).toBe(true);
    } finally {
      await replica.stop();
      await master.stop();
    }
  });

  it('exports every error class in the errors map with stable codes', () => {
    expect(new errors.LockTimeoutError('x').code).toBe('E_LOCK_TIMEOUT');
    expect(new errors.LockLostError('x').name).toBe('LockLostError');
    expect(new errors.LoaderError('x', { cause: 1 }).cause).toBe(1);
  });
});

describe('RedisLock: subscribing is part of the wait', () => {
  /** A TCP server on 127.0.0.1 that accepts connections and never answers (a Redis that hangs). */
  async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
    const sockets = new Set<net.Socket>();
    const srv = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    return {
      port: (srv.address() as net.AddressInfo).port,
      close: () =>
        new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy();
          srv.close(() => resolve());
        }),
    };
  }

  it('acquire() ends at its timeout, or when its signal aborts, while its subscriber is never answered', async () => {
    const silent = await silentServer();
    const connection = new IORedis({ host: '127.0.0.1', port: silent.port, lazyConnect: false, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    connection.on('error', () => {});
    const subscriber = new Subscriber(connection, { owned: true });
    const name = uniq('silent-subscriber');
    const holder = new RedisLock(lib, name);
    await holder.acquire();
    const waiter = new RedisLock(lib, name, { subscriber });
    try {
      await expect(waiter.acquire({ timeout: 200 })).rejects.toBeInstanceOf(LockTimeoutError);
      const controller = new AbortController();
      const aborted = waiter.acquire({ timeout: 60_000, signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      await expect(aborted).rejects.toBeInstanceOf(AbortedError);
      // Nothing was queued: the waiter gave up before it could enqueue.
      expect(await redis.zcard(lockKeys('dogpile', name).queue)).toBe(0);
      expect(await holder.getOwnerId()).not.toBeNull();
    } finally {
      await holder.release();
      subscriber.close();
      await silent.close();
    }
  });
});

describe('RedisLock on a Redis that stops answering (CLIENT PAUSE)', () => {
  it('acquire() gives up at its timeout, before Redis answers again; a late answer is undone', async () => {
    const own = await startRedis();
    const admin = own.client();
    const probe = own.client();
    const lib2 = await own.libraryClient();
    try {
      // 1. The first try itself is not answered.
      const name = uniq('paused-first-try');
      await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
      // Answered once the pause ends: the mark every bounded wait must beat.
      const resumed = probe.ping().then(() => 'resumed');
      const first = new RedisLock(lib2, name).acquire({ timeout: 150 }).then(
        () => 'acquired',
        (error: unknown) => (error instanceof LockTimeoutError ? 'timed out' : `other: ${String(error)}`),
      );
      expect(await Promise.race([first, resumed])).toBe('timed out');
      await resumed;
      // Its late try took the free lock, and gave it back.
      await waitUntilUndone(admin, name);

      // 2. A queued waiter's next try (after the holder's TTL ran out) is not answered.
      const name2 = uniq('paused-queued');
      const holder = new RedisLock(lib2, name2, { ttl: 200 });
      await holder.acquire();
      const waiting = new RedisLock(lib2, name2).acquire({ timeout: 700 }).then(
        () => 'acquired',
        (error: unknown) => (error instanceof LockTimeoutError ? 'timed out' : `other: ${String(error)}`),
      );
      while ((await admin.zcard(lockKeys('dogpile', name2).queue)) < 1) await new Promise((r) => setTimeout(r, 5));
      await admin.call('CLIENT', 'PAUSE', '2000', 'ALL');
      const resumed2 = probe.ping().then(() => 'resumed');
      expect(await Promise.race([waiting, resumed2])).toBe('timed out');
      await resumed2;
      // Its late ACQUIRE found the lock expired and took it, or queued it again: either way it
      // was undone. The late reply reaches the client a moment after the probe's: the lock and
      // the queue are waited for until both are clear, and must stay clear.
      await waitUntilUndone(admin, name2);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => {});
      await own.stop();
    }
  });

  /**
   * Waits until `name` is neither held nor queued for, and has stayed so for 300 ms: a late try
   * may reach Redis after the first look (a client under load sends it only once Redis answers
   * again), take the lock or a place in the queue, and give it back. Bounded at 5 s on the
   * monotonic clock, half the lock's default 10 s TTL, so a lock that is only gone because it
   * expired still fails here.
   */
  async function waitUntilUndone(client: Redis, name: string): Promise<void> {
    const keys = lockKeys('dogpile', name);
    const clear = async () => (await client.exists(keys.lock)) === 0 && (await client.zcard(keys.queue)) === 0;
    const deadline = performance.now() + 5000;
    let clearSince: number | undefined;
    while (performance.now() < deadline) {
      if (!(await clear())) clearSince = undefined;
      else if (clearSince === undefined) clearSince = performance.now();
      else if (performance.now() - clearSince >= 300) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await client.exists(keys.lock)).toBe(0);
    expect(await client.zcard(keys.queue)).toBe(0);
  }
});

describe('RedisLock on a Redis that is gone', () => {
  it('rejects with BackendError (the client\'s error as its cause) from acquire, tryAcquire, release, getOwnerId, reset and resetAll, never with the client\'s own error', async () => {
    const own = await startRedis();
    // No offline queue: with the server gone, every command fails at once with the client's own error.
    const client = own.client({ enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    try {
      const name = uniq('gone');
      for (let i = 0; client.status !== 'ready' && i < 1000; i++) await new Promise((r) => setTimeout(r, 5));
      const held = new RedisLock(client, name, { autoRenew: false });
      await held.acquire();
      await own.kill();
      for (let i = 0; client.status === 'ready' && i < 1000; i++) await new Promise((r) => setTimeout(r, 5));
      const outcome = (call: Promise<unknown>) =>
        call.then(
          () => 'resolved',
          (error: unknown) => (error instanceof errors.BackendError && error.code === 'E_BACKEND' && error.key === name && error.cause instanceof Error && !(error.cause instanceof errors.DogpileError) ? 'BackendError' : `other: ${String(error)}`),
        );
      expect(await outcome(held.release())).toBe('BackendError');
      expect(await outcome(new RedisLock(client, name).tryAcquire())).toBe('BackendError');
      expect(await outcome(new RedisLock(client, name).acquire({ timeout: 1000 }))).toBe('BackendError');
      expect(await outcome(new RedisLock(client, name).getOwnerId())).toBe('BackendError');
      expect(await outcome(RedisLock.reset(client, name))).toBe('BackendError');
      expect(await RedisLock.resetAll(client).then(() => 'resolved', (error: unknown) => (error instanceof errors.BackendError && error.cause instanceof Error ? 'BackendError' : `other: ${String(error)}`))).toBe('BackendError');
    } finally {
      await own.stop();
    }
  });
});
