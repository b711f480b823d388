/**
 * One clock for the fleet: the Redis server's. What orders writes between processes (an
 * entry's created-at, a delete, a tag stamp) is taken by the server inside its scripts, and
 * freshness is read on the server's clock, so a process whose wall clock is off by seconds
 * neither serves an old entry as fresh nor drops a new one as invalidated; writes of one key
 * are ordered strictly, so a delete resolving in the same millisecond as the write before it
 * still drops every copy; and a process whose subscriber connection is gone stops answering
 * from its L1 at once.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createCache, type DogpileCache } from '../src/index.js';
import { BackendError } from '../src/shared/errors.js';
import { useRedis } from './support/use-redis.js';
import { JsonChild, killAllChildren, root, type Message } from '../tools/child-process.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { closeLibraryClient } from '../tools/test-client.js';
import type { RedisClient } from '../src/redis/client.js';

/** "Within one pub/sub delivery", as checked here: far below the 60 s L1 TTL, far above a delivery on a loaded machine. */
const DELIVERY_BOUND_MS = 1_000;
/** A wall clock this far off (ahead or behind) is what each shifted process runs on. */
const SHIFT_MS = 2_000;
/** Shorter than the shift: on a process's own clock, an entry written by the other would already be past it, or not yet. */
const TTL_MS = 1_500;

const server = useRedis();


afterAll(killAllChildren);

function worker(label: string, shift: number): JsonChild {
  const config = { url: server.url, ttl: TTL_MS, staleWhileRevalidate: 60_000, l1Ttl: 60_000 };
  return new JsonChild(
    label,
    ['--import', 'tsx', '--import', path.join(root, 'test/fixtures/shifted-clock.ts'), path.join(root, 'test/fixtures/clock-worker.ts'), JSON.stringify(config)],
    { cwd: root, env: { ...process.env, DOGPILE_CLOCK_SHIFT_MS: String(shift) } },
  );
}

async function ask(w: JsonChild, command: Record<string, unknown>): Promise<Message> {
  w.send(command);
  return w.take('done', 10_000);
}

describe('a process whose wall clock is off by seconds', () => {
  let db: Redis;
  let normal: JsonChild;
  let ahead: JsonChild;
  let behind: JsonChild;

  beforeAll(async () => {
    db = server.client();
    normal = worker('clock-normal', 0);
    ahead = worker('clock-ahead', SHIFT_MS);
    behind = worker('clock-behind', -SHIFT_MS);
    await Promise.all([normal, ahead, behind].map((w) => w.take('ready', 30_000)));
    // The shift is real: the processes' wall clocks disagree by seconds.
    const [a, b] = [await ask(ahead, { cmd: 'clock' }), await ask(behind, { cmd: 'clock' })];
    expect((a.wall as number) - (b.wall as number)).toBeGreaterThan(2 * SHIFT_MS - 500);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([normal, ahead, behind].map((w) => w?.exit()));
  });

  it('its writes are fresh everywhere for their TTL, and its reads see others\' writes as fresh', async () => {
    const key = freshId('written-behind');
    await ask(behind, { cmd: 'set', key, version: 1 });
    // On the reader's clock the entry would be 2 s old, past its 1.5 s TTL: stale. It is not.
    expect(await ask(normal, { cmd: 'read', key })).toMatchObject({ status: 'hit', version: 1 });
    expect(await ask(ahead, { cmd: 'read', key })).toMatchObject({ status: 'hit', version: 1 });

    const other = freshId('written-normal');
    await ask(normal, { cmd: 'set', key: other, version: 1 });
    // The process 2 s ahead would see it past its TTL already.
    expect(await ask(ahead, { cmd: 'read', key: other })).toMatchObject({ status: 'hit', version: 1 });
  });

  it('its reads never treat an entry past its TTL as fresh', async () => {
    const key = freshId('expired');
    const written = performance.now();
    await ask(normal, { cmd: 'set', key, version: 1 });
    await sleep(TTL_MS + 200 - (performance.now() - written));
    // 1.7 s after the write: on the clock of the process 2 s behind it is not written yet. It is stale (served within its window, and refreshed).
    expect(await ask(behind, { cmd: 'read', key })).toMatchObject({ status: 'stale', version: 1 });
  });

  it('its deletes drop every process\'s copy', async () => {
    const key = freshId('deleted-behind');
    await db.set(`${key}:version`, '1');
    for (const w of [normal, ahead]) {
      await waitUntil(`${w.label} holds the key in its L1`, async () => (await ask(w, { cmd: 'read', key })).layer === 'l1');
    }
    await db.set(`${key}:version`, '2');
    await ask(behind, { cmd: 'delete', key });
    for (const w of [normal, ahead]) {
      await waitUntil(`${w.label} drops its copy`, async () => (await ask(w, { cmd: 'read', key })).version === 2, DELIVERY_BOUND_MS);
    }
  });

  it('its invalidations take effect everywhere, and values computed after another\'s invalidation are not taken as invalidated', async () => {
    const key = freshId('tagged');
    const tag = freshId('tag');
    await db.set(`${key}:version`, '1');
    expect(await ask(normal, { cmd: 'read', key, tags: [tag] })).toMatchObject({ version: 1 });
    await db.set(`${key}:version`, '2');
    // Invalidated by the process 2 s behind: its stamp would fall before the entry was made.
    await ask(behind, { cmd: 'invalidate', tags: [tag] });
    expect(await ask(normal, { cmd: 'read', key, tags: [tag] })).toMatchObject({ status: 'miss', version: 2 });

    const next = freshId('tagged');
    const tag2 = freshId('tag');
    await db.set(`${next}:version`, '1');
    await ask(normal, { cmd: 'invalidate', tags: [tag2] });
    // Computed after the invalidation by the process 2 s behind: on its clock it would predate the stamp.
    expect(await ask(behind, { cmd: 'read', key: next, tags: [tag2] })).toMatchObject({ status: 'miss', version: 1 });
    await db.set(`${next}:version`, '2');
    expect(await ask(normal, { cmd: 'read', key: next, tags: [tag2] })).toMatchObject({ status: 'hit', version: 1 });
  });
});

describe('writes of one key in the same millisecond', () => {
  let writerClient: Redis;
  let readerClient: Redis;
  let writer: DogpileCache;
  let reader: DogpileCache;

  beforeAll(() => {
    writerClient = server.client();
    readerClient = server.client();
    writer = createCache({ redis: writerClient, l1: { max: 100, ttl: 60_000 } });
    reader = createCache({ redis: readerClient, l1: { max: 100, ttl: 60_000 } });
  });

  afterAll(async () => {
    await writer.close();
    await reader.close();
  });

  it('set then delete, back to back: no process serves the set value once the delete resolved', async () => {
    const key = freshId('same-ms');
    for (let round = 0; round < 30; round++) {
      await writer.set(key, `held-${round}`, 60_000);
      let layer = '';
      const onHit = (e: { layer: string }) => (layer = e.layer);
      reader.on('hit', onHit);
      await waitUntil('the reader holds the key in its L1', async () => {
        layer = '';
        await reader.getOrCompute(key, () => 'loaded', 60_000);
        return layer === 'l1';
      });
      reader.off('hit', onHit);
      await writer.set(key, `gone-${round}`, 60_000);
      await writer.delete(key);
      // The writer's own copy goes with its delete; the reader's within one delivery.
      expect(await writer.get(key)).toBeUndefined();
      await waitUntil(`round ${round}: the reader drops its copy`, async () => (await reader.get(key)) === undefined, DELIVERY_BOUND_MS);
      expect(await reader.get(key)).toBeUndefined();
    }
  });
});

describe('a process whose subscriber connection is gone', () => {
  let admin: Redis;
  let writerClient: Redis;
  let readerClient: RedisClient;
  let writer: DogpileCache;
  let reader: DogpileCache;

  beforeAll(async () => {
    admin = server.client();
    writerClient = server.client();
    readerClient = await server.libraryClient();
    writer = createCache({ redis: writerClient });
    reader = createCache({ redis: readerClient, l1: { max: 100, ttl: 60_000 } });
  });

  afterAll(async () => {
    await admin.config('SET', 'maxclients', '10000');
    await writer.close();
    await reader.close();
    await closeLibraryClient(readerClient);
  });

  it('stops answering from its L1 at once, and trusts it again once the channel is back', async () => {
    const key = freshId('deaf');
    const tagged = freshId('deaf-tagged');
    const tag = freshId('tag');
    let version = 1;
    let layer = '';
    reader.on('hit', (e) => (layer = e.layer));
    const read = async (k: string) => {
      layer = '';
      const value = await reader.getOrCompute(k, () => version, k === tagged ? { ttl: 60_000, tags: [tag] } : 60_000);
      return { value, layer };
    };
    for (const k of [key, tagged]) await waitUntil(`${k} is answered from the L1`, async () => (await read(k)).layer === 'l1');

    // The subscriber connection is killed, and no new connection is accepted: it cannot come back.
    const connected = Number(String(await admin.info('clients')).match(/connected_clients:(\d+)/)![1]);
    const subscribers = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n').filter((line) => line.trim() !== '').length;
    expect(subscribers).toBeGreaterThan(0);
    await admin.config('SET', 'maxclients', String(connected - subscribers));
    await admin.client('KILL', 'TYPE', 'pubsub');
    version = 2;
    await writer.delete(key);
    await writer.invalidateTags([tag]);
    // Neither the delete nor the invalidation can reach the reader: it must not answer from memory.
    await waitUntil('the deleted key is read from Redis', async () => (await read(key)).value === 2, DELIVERY_BOUND_MS);
    await waitUntil('the invalidated key is read from Redis', async () => (await read(tagged)).value === 2, DELIVERY_BOUND_MS);
    for (let i = 0; i < 5; i++) expect((await read(key)).layer).not.toBe('l1');

    // Connections accepted again: the subscriber comes back, and the L1 answers again.
    await admin.config('SET', 'maxclients', '10000');
    await waitUntil('the L1 answers again', async () => (await read(key)).layer === 'l1', 20_000, 50);
  });
});

describe('a write that reaches Redis after its caller gave up', () => {
  it('is refused there: a set rejected after commandTimeout never lands later', async () => {
    const client = server.client();
    const cache = createCache({ redis: client, commandTimeout: 200 });
    try {
      const key = freshId('late');
      await cache.set(key, 'before', 60_000);
      await server.clientPause(1_000);
      await expect(cache.set(key, 'late', 60_000)).rejects.toBeInstanceOf(BackendError);
      // Once the pause is over, the PING sent after the set is answered after the set's script ran: it found its caller gone and wrote nothing.
      expect(await client.ping()).toBe('PONG');
      expect(await cache.get(key)).toBe('before');
    } finally {
      await cache.close();
    }
  });
});
