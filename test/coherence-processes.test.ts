/**
 * Tags and a coherent L1 across real processes: 4 Node processes hold a key in an L1 that
 * would serve it for 60 s; one of them invalidates its tag, deletes it, or stores a new
 * value, and every other process must return the new value within one pub/sub delivery (bounded
 * here by a few hundred ms; the measured lags are printed). On one Redis and on a 3-master
 * cluster (sharded pub/sub), and with the subscriber connections killed between two writes.
 */
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { useRedis, useRedisCluster } from './support/use-redis.js';
import { JsonChild, killAllChildren, root } from '../tools/child-process.js';
import { freshId } from '../tools/basics.js';

/** What "within one delivery" is checked against: far below the 60 s L1 TTL, far above a delivery. */
const DELIVERY_BOUND_MS = 500;
const L1_TTL = 60_000;
/** The same after the subscriber connections were killed: the reconnect, far below the L1 TTL. */
const RECONNECT_BOUND_MS = 2_000;

afterEach(killAllChildren);
afterAll(killAllChildren);

interface Target {
  url?: string;
  cluster?: { host: string; port: number }[];
}

function worker(i: number, target: Target, extra: Record<string, unknown> = {}): JsonChild {
  const config = { ...target, l1Ttl: L1_TTL, ttl: 600_000, ...extra };
  return new JsonChild(`coherent-${i}`, ['--import', 'tsx', path.join(root, 'test/fixtures/coherent-worker.ts'), JSON.stringify(config)], { cwd: root });
}

async function startWorkers(target: Target, extra: Record<string, unknown> = {}): Promise<JsonChild[]> {
  const workers = Array.from({ length: 4 }, (_, i) => worker(i, target, extra));
  await Promise.all(workers.map((w) => w.take('ready', 30_000)));
  return workers;
}

interface Watched {
  firstNew?: number;
  lastOld?: number;
  reads: number;
  statuses: Record<string, number>;
}

/**
 * Every worker holds `key` in its L1; worker 0 then runs `write` (which stores `version` 2 in
 * its own way) while the three others read in a loop. Returns, per reader, how long after the
 * write resolved it last returned the old value and first returned the new one.
 *
 * The writer does not read after its write: were it to miss and recompute, its commit's value
 * announcement would replace the others' copies, and the test would pass with the "deleted" or
 * tag announcement ignored. The readers' copies must therefore go by the write's own
 * announcement; only then can a reader miss, and its recompute is the next event.
 */
async function propagate(workers: JsonChild[], key: string, tags: string[] | undefined, write: Record<string, unknown>, beforeWrite?: () => Promise<void>, bound = DELIVERY_BOUND_MS) {
  await Promise.all(workers.map(async (w) => {
    w.send({ cmd: 'warm', key, tags });
    await w.take('warm', 20_000);
  }));
  const readers = workers.slice(1);
  for (const w of readers) w.send({ cmd: 'watch', key, tags, version: 2, durationMs: 8_000 });
  await beforeWrite?.();
  workers[0]!.send({ key, tags, version: 2, ...write });
  const done = await workers[0]!.take('done', 10_000);
  const watched = (await Promise.all(readers.map((w) => w.take('watched', 20_000)))) as unknown as Watched[];
  const at = done.at as number;
  const lags = watched.map((w) => ({
    newAfter: w.firstNew === undefined ? undefined : Math.round((w.firstNew - at) * 10) / 10,
    oldUntil: w.lastOld === undefined ? undefined : Math.round((w.lastOld - at) * 10) / 10,
    reads: w.reads,
    statuses: w.statuses,
  }));
  console.log(`${String(write.cmd)}: ms after the write resolved, per reading process: ${JSON.stringify(lags)}`);
  for (const lag of lags) {
    expect(lag.newAfter, 'every process returns the new value').toBeDefined();
    expect(lag.newAfter!).toBeLessThan(bound);
    if (lag.oldUntil !== undefined) expect(lag.oldUntil).toBeLessThan(bound);
    // Before the write, the reads were answered from the L1 (no round trip).
    expect(lag.statuses.hit ?? 0).toBeGreaterThan(0);
  }
  return lags;
}

describe('one Redis, 4 processes, an L1 with a 60 s TTL', () => {
  const server = useRedis();
  let redis: Redis;
  beforeAll(() => {
    redis = server.client();
  });

  it('invalidateTags: no process returns the old value after one delivery; the loader runs again', async () => {
    const workers = await startWorkers({ url: server.url });
    const key = freshId('tagged');
    const tag = freshId('user');
    await propagate(workers, key, [tag, 'other'], { cmd: 'invalidate' });
    // One run to fill, and after the invalidation the recompute of each process's miss coalesces: one more.
    expect(Number(await redis.get(`${key}:runs`))).toBe(2);
  });

  it('delete: every process drops its copy within one delivery', async () => {
    const workers = await startWorkers({ url: server.url });
    const key = freshId('deleted');
    await propagate(workers, key, undefined, { cmd: 'delete' });
    expect(Number(await redis.get(`${key}:runs`))).toBe(2);
  });

  it('set: the new value reaches every process within one delivery, without a recompute', async () => {
    const workers = await startWorkers({ url: server.url });
    const key = freshId('set');
    await propagate(workers, key, undefined, { cmd: 'set' });
    expect(Number(await redis.get(`${key}:runs`))).toBe(1);
  });

  it('invalidateTags({ stale: true }): the stale value is served while exactly one refresh runs fleet-wide, and its value reaches every process', async () => {
    const workers = await startWorkers({ url: server.url }, { staleWhileRevalidate: 60_000 });
    const key = freshId('stale-tagged');
    const tag = freshId('product');
    const lags = await propagate(workers, key, [tag], { cmd: 'invalidate', stale: true });
    expect(Number(await redis.get(`${key}:runs`))).toBe(2);
    // At least one process answered with the stale value while the refresh ran.
    expect(lags.some((l) => (l.statuses.stale ?? 0) > 0)).toBe(true);
  });

  it('the subscriber connections killed between two writes: the value written meanwhile is returned once they are back', async () => {
    const workers = await startWorkers({ url: server.url });
    const key = freshId('killed');
    // The bound here is the reconnect (ioredis waits 50 ms before its first attempt), not a delivery.
    await propagate(
      workers,
      key,
      undefined,
      { cmd: 'set' },
      async () => {
        const killed = Number(await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub'));
        expect(killed).toBeGreaterThanOrEqual(4);
      },
      RECONNECT_BOUND_MS,
    );
  });

  it('a copy written over while the subscriber was down is not served once it is back, even after another read trusts the stamps again', async () => {
    const workers = await startWorkers({ url: server.url });
    const written = freshId('missed');
    const other = freshId('other');
    const readers = workers.slice(1);
    for (const key of [written, other]) {
      await Promise.all(workers.map(async (w) => {
        w.send({ cmd: 'warm', key });
        await w.take('warm', 20_000);
      }));
    }
    // The write lands while no reader's subscriber is connected (ioredis waits 50 ms before it
    // reconnects): its announcement never reaches them.
    const killed = Number(await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub'));
    expect(killed).toBeGreaterThanOrEqual(4);
    workers[0]!.send({ cmd: 'set', key: written, version: 2 });
    await workers[0]!.take('done', 10_000);
    // Each reader waits until the other key is answered from its L1 again: its subscriber is
    // back, the other key's channel live, and the cache's generation stamp read and trusted
    // again, so nothing but the copy of `written` itself stands between a read and the L1.
    await Promise.all(readers.map(async (w) => {
      w.send({ cmd: 'warm', key: other });
      await w.take('warm', 20_000);
    }));
    for (const w of readers) {
      w.send({ cmd: 'read', key: written });
      const read = await w.take('read', 10_000);
      expect(read.version, `the value written while the subscriber was down (the read: ${String(read.status)}, layer '${String(read.layer)}')`).toBe(2);
    }
    expect(Number(await redis.get(`${written}:runs`))).toBe(1);
  });
});

describe('a 3-master Redis Cluster (sharded pub/sub), 4 processes', () => {
  const cluster = useRedisCluster(3);

  it('invalidateTags and delete reach every process within one delivery', async () => {
    const workers = await startWorkers({ cluster: cluster.startupNodes });
    const client = cluster.client();
    const key = freshId('c-tagged');
    // Tags on other slots than the key, and on more than one master.
    const tags = ['t-a', 't-b', 't-c'].map((t) => freshId(t));
    await propagate(workers, key, tags, { cmd: 'invalidate' });
    expect(Number(await client.get(`${key}:runs`))).toBe(2);
    const other = freshId('c-deleted');
    await propagate(workers, other, undefined, { cmd: 'delete' });
    expect(Number(await client.get(`${other}:runs`))).toBe(2);
  });
});
