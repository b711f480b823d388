/**
 * Failovers: Redis Cluster masters with replicas (a master killed, its replica promoted) and
 * Redis Sentinel. Slow (each test starts its own servers and waits for a failover), so kept
 * apart from cluster.test.ts for focused runs to skip.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, lockKeys, LockReplicationError, RedisLock } from '../src/index.js';
import { keySlot } from '../src/redis/pubsub-mode.js';
import { ShardedSubscriberConnection } from '../src/redis/sharded-connection.js';
import { Subscriber } from '../src/redis/subscriber.js';
import { cacheKeys } from '../src/store/key.js';
import { RedisSentinelSetup, RedisTestCluster, type RedisServer } from '../tools/redis-server.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { sleep } from '../tools/basics.js';

/** 3 masters with one replica each; a dead master is failed over about a second later. */
async function replicatedCluster(): Promise<RedisTestCluster> {
  return new RedisTestCluster(3, { replicas: 1, nodeTimeoutMs: 1000 }).start();
}

/** The replica that follows `master`. */
async function replicaOf(cluster: RedisTestCluster, master: RedisServer): Promise<RedisServer> {
  for (const node of cluster.nodes) {
    if (node === master || !node.running) continue;
    const info = String(await node.command('INFO', 'replication'));
    if (info.includes('role:slave') && info.includes(`master_port:${master.port}`)) return node;
  }
  throw new Error(`no replica follows ${master.port}`);
}

/** Polls `check` every 50 ms until it holds (bounded on the monotonic clock). */
async function until(check: () => Promise<boolean>, boundMs = 30_000): Promise<void> {
  const deadline = performance.now() + boundMs;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`condition not met within ${boundMs} ms`);
    await sleep(50);
  }
}

/** Kills `master` and waits until another node serves `slot` and the cluster is whole again. */
async function failOver(cluster: RedisTestCluster, master: RedisServer, slot: number): Promise<RedisServer> {
  await master.kill();
  await until(async () => (await cluster.masterOf(slot)) !== master);
  await cluster.waitHealthy(30_000);
  return cluster.masterOf(slot);
}

afterEach(killAllChildren);

describe('replicas: a lock counts once replicas hold it', () => {
  it("with replicas: 'majority', nobody else acquires the lock after its master dies and the replica is promoted", async () => {
    const cluster = await replicatedCluster();
    try {
      const slot = keySlot(lockKeys('dogpile', 'failover').lock);
      const master = await cluster.masterOf(slot);
      const replica = await replicaOf(cluster, master);
      // The replica lags: frozen, its link cut. It comes back 300 ms later and resyncs; the
      // acquisition counts only once the replica confirmed it.
      replica.freeze();
      await master.command('CLIENT', 'KILL', 'TYPE', 'replica');
      const lock = new RedisLock(cluster.client(), 'failover', { replicas: 'majority', replicaTimeout: 10_000, ttl: 60_000, autoRenew: false, id: 'holder' });
      const thaw = sleep(300).then(() => replica.thaw());
      await lock.acquire();
      // Killed right after the acquisition: the promoted replica must know the lock.
      const killed = master.kill();
      await thaw;
      await killed;
      const promoted = await failOver(cluster, master, slot);
      const other = new RedisLock(cluster.client(), 'failover', { id: 'other', autoRenew: false });
      expect(await other.tryAcquire()).toBe(false);
      expect(await other.getOwnerId()).toBe('holder');
      expect(Number(await promoted.command('PTTL', lockKeys('dogpile', 'failover').lock))).toBeGreaterThan(0);
    } finally {
      await cluster.stop();
    }
  });

  it('with replicas: 0 (the default) a failover can lose the lock: another caller acquires it at once', async () => {
    const cluster = await replicatedCluster();
    try {
      const slot = keySlot(lockKeys('dogpile', 'lost').lock);
      const master = await cluster.masterOf(slot);
      const replica = await replicaOf(cluster, master);
      // The replica falls behind: frozen, and its link cut, so the acquisition never reaches it.
      replica.freeze();
      await master.command('CLIENT', 'KILL', 'TYPE', 'replica');
      const lock = new RedisLock(cluster.client(), 'lost', { ttl: 60_000, autoRenew: false, id: 'holder' });
      await lock.acquire();
      await master.kill();
      replica.thaw();
      await failOver(cluster, master, slot);
      const other = new RedisLock(cluster.client(), 'lost', { id: 'other', autoRenew: false });
      expect(await other.tryAcquire()).toBeGreaterThan(0);
      expect(await other.getOwnerId()).toBe('other');
    } finally {
      await cluster.stop();
    }
  });

  it('when the replicas do not confirm in time the acquisition is released and reported with LockReplicationError', async () => {
    const cluster = await replicatedCluster();
    try {
      const slot = keySlot(lockKeys('dogpile', 'unconfirmed').lock);
      const replica = await replicaOf(cluster, await cluster.masterOf(slot));
      replica.freeze();
      try {
        const lock = new RedisLock(cluster.client(), 'unconfirmed', { replicas: 'majority', replicaTimeout: 50, autoRenew: false });
        const err = await lock.acquire().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(LockReplicationError);
        expect((err as LockReplicationError).code).toBe('E_LOCK_REPLICATION');
        expect(lock.isHeld).toBe(false);
        expect(await lock.getOwnerId()).toBeNull();
      } finally {
        replica.thaw();
      }
    } finally {
      await cluster.stop();
    }
  });
});

describe('sharded subscriptions follow the slot', () => {
  it('a channel subscribed while the client still holds the slot table from before a manual failover lands on the new master, not on the demoted one', { timeout: 120_000 }, async () => {
    const cluster = await replicatedCluster();
    try {
      const client = cluster.client();
      const channel = lockKeys('dogpile', 'stale-table').channel;
      const slot = keySlot(channel);
      const master = await cluster.masterOf(slot);
      const replica = await replicaOf(cluster, master);
      await client.ping();
      // The failover happens behind the client's back: it sends nothing to that slot, so
      // nothing answers it MOVED and its slot table still names the demoted master.
      await replica.command('CLUSTER', 'FAILOVER');
      await until(async () => (await cluster.masterOf(slot)) === replica);
      await until(async () => String(await master.command('ROLE')).startsWith('slave'));
      expect(client.slots[slot]?.[0]).toBe(`${master.host}:${master.port}`);
      // A demoted master accepts SSUBSCRIBE for its new master's slots, but until the new
      // master counts it among its replicas, a SPUBLISH never reaches it: the channel must be
      // subscribed on the new master itself.
      const subscriber = new Subscriber(new ShardedSubscriberConnection(client), { owned: true });
      const heard: (string | null)[] = [];
      await subscriber.listen(channel, (message) => heard.push(message === null ? null : message.toString()));
      expect(await replica.command('PUBSUB', 'SHARDCHANNELS')).toContain(channel);
      expect(await master.command('PUBSUB', 'SHARDCHANNELS')).toEqual([]);
      await replica.command('SPUBLISH', channel, 'wake');
      await until(async () => heard.includes('wake'));
      subscriber.close();
    } finally {
      await cluster.stop();
    }
  });

  // The failover and the cluster settling can take tens of seconds on a busy machine: the wait
  // is long, and the holder's TTL longer still, so only a wake-up can end it in time. A master
  // that dies is covered below.
  it('a manual failover (CLUSTER FAILOVER: the master demoted, not dead) re-subscribes a waiting channel in its shard and the wake-up arrives', { timeout: 240_000 }, async () => {
    const cluster = await replicatedCluster();
    try {
      const holder = new RedisLock(cluster.client(), 'manual', { ttl: 600_000, autoRenew: false });
      const waiter = new RedisLock(cluster.client(), 'manual', { ttl: 60_000, autoRenew: false });
      await holder.acquire();
      const waiting = waiter.acquire({ timeout: 150_000 }).catch((e: unknown) => e);
      const channel = lockKeys('dogpile', 'manual').channel;
      const slot = keySlot(channel);
      const master = await cluster.masterOf(slot);
      await until(async () => ((await master.command('PUBSUB', 'SHARDCHANNELS')) as string[]).includes(channel));
      const replica = await replicaOf(cluster, master);
      await replica.command('CLUSTER', 'FAILOVER');
      await until(async () => (await cluster.masterOf(slot)) === replica);
      await cluster.waitHealthy(30_000);
      // The old master sent SUNSUBSCRIBE when it became a replica; the channel is subscribed
      // again on the new master, whichever slot table the client had when it moved the channel
      // (the demoted master would accept it, but hears nothing until the new master counts it
      // as a replica).
      await until(async () => ((await replica.command('PUBSUB', 'SHARDCHANNELS')) as string[]).includes(channel));
      expect(await master.command('PUBSUB', 'SHARDCHANNELS')).toEqual([]);
      await holder.release();
      // The holder's TTL is ten minutes: only a wake-up hands the lock over within the wait.
      const token = await waiting;
      if (typeof token !== 'number') throw token;
      expect(token).toBeGreaterThan(0);
      await waiter.release();
    } finally {
      await cluster.stop();
    }
  });
});

describe('a master killed during a stampede', () => {
  it('answers every caller, and coordination (one loader, sharded wake-ups) comes back after the failover', async () => {
    const cluster = await replicatedCluster();
    try {
      const options = { commandTimeout: 500, waitTimeout: 20_000, l1: false } as const;
      const a = createCache({ redis: cluster.client(), ...options });
      const b = createCache({ redis: cluster.client(), ...options });
      // Keys on the shard whose master dies.
      const victim = await cluster.masterOf(keySlot(cacheKeys('dogpile', 'probe').channel));
      const victimSlotKeys: string[] = [];
      for (let i = 0; victimSlotKeys.length < 12; i++) {
        const key = `stampede-${i}`;
        if ((await cluster.masterOf(keySlot(cacheKeys('dogpile', key).channel))) === victim) victimSlotKeys.push(key);
      }
      const runs = new Map<string, number>();
      const stampede = async (key: string) => {
        const loader = async () => {
          runs.set(key, (runs.get(key) ?? 0) + 1);
          await sleep(100);
          return `v-${key}`;
        };
        const calls = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).getOrCompute(key, loader, 60_000));
        const settled = await Promise.allSettled(calls);
        return settled.map((s) => (s.status === 'fulfilled' ? s.value : `error: ${String(s.reason)}`));
      };
      // Before: coordinated.
      expect(await stampede(victimSlotKeys[0]!)).toEqual(Array(10).fill(`v-${victimSlotKeys[0]}`));
      expect(runs.get(victimSlotKeys[0]!)).toBe(1);
      // During: the master dies while stampedes run on its slot; every caller gets the value.
      const during = (async () => {
        const results: string[][] = [];
        for (const key of victimSlotKeys.slice(1, 8)) results.push(await stampede(key));
        return results;
      })();
      await sleep(150);
      const slot = keySlot(cacheKeys('dogpile', victimSlotKeys[1]!).channel);
      const killed = victim.kill();
      const results = await during;
      await killed;
      victimSlotKeys.slice(1, 8).forEach((key, i) => expect(results[i]).toEqual(Array(10).fill(`v-${key}`)));
      // After the replica took over: one loader per key again, and waiters in the other
      // client are woken through the new master's sharded channel.
      await until(async () => (await cluster.masterOf(slot)) !== victim);
      await cluster.waitHealthy(30_000);
      await sleep(1500); // past the cooldown of a breaker the failover tripped
      for (const key of victimSlotKeys.slice(8)) {
        expect(await stampede(key)).toEqual(Array(10).fill(`v-${key}`));
        expect(runs.get(key)).toBe(1);
      }
      await a.close();
      await b.close();
    } finally {
      await cluster.stop();
    }
  });
});

interface RoundResult {
  key: string;
  results: { ok: boolean; value?: string; name?: string; message?: string }[];
}

describe('Redis Sentinel', () => {
  it('a master killed during a stampede across processes: every caller is answered, coordination resumes on the promoted replica', async () => {
    const setup = await new RedisSentinelSetup().start();
    try {
      const workers = Array.from({ length: 3 }, () =>
        NodeChild.tsx('test/fixtures/sentinel-worker.ts', [JSON.stringify({ sentinels: setup.sentinelAddresses, name: setup.name })]),
      );
      await Promise.all(workers.map((w) => w.waitFor((l) => l === 'ready')));
      let round = 0;
      const stampede = async (options: { lockTtl?: number; waitTimeout?: number } = {}): Promise<RoundResult['results']> => {
        const key = `sentinel-${round++}`;
        const replies = workers.map((w) => w.waitFor((l) => l.startsWith(`{"key":"${key}"`), 60_000));
        for (const w of workers) w.write(`${JSON.stringify({ key, ...options })}\n`);
        return (await Promise.all(replies)).flatMap((line) => (JSON.parse(line) as RoundResult).results);
      };
      // With a lock TTL of a minute and a 15 s wait, a waiter in another process is served only
      // by a wake-up: were its subscription lost, it would wait out the wait and throw.
      const coordinated = { lockTtl: 60_000, waitTimeout: 15_000 };
      const before = await stampede(coordinated);
      expect(before.every((r) => r.ok)).toBe(true);
      expect(new Set(before.map((r) => r.value)).size).toBe(1);

      // Stampedes go on while the master is killed and the sentinels promote the replica.
      const original = setup.master;
      let failingOver = true;
      const during: RoundResult['results'] = [];
      const load = (async () => {
        while (failingOver) during.push(...(await stampede()));
      })();
      await sleep(200);
      await original.kill();
      await until(async () => (await setup.masterPort()) === setup.replica.port, 60_000);
      await until(async () => String(await setup.replica.command('ROLE')).startsWith('master'), 30_000);
      failingOver = false;
      await load;
      expect(during.filter((r) => !r.ok)).toEqual([]);
      expect(during.length).toBeGreaterThan(0);

      await sleep(1500); // past the cooldown of a breaker the failover tripped
      for (let i = 0; i < 2; i++) {
        const after = await stampede(coordinated);
        expect(after.filter((r) => !r.ok)).toEqual([]);
        expect(new Set(after.map((r) => r.value)).size).toBe(1);
      }
      for (const w of workers) await w.endInput(20_000);
    } finally {
      await setup.stop();
    }
  });
});
