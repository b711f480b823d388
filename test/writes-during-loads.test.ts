/**
 * A write resolves while a loader that began before it is still running: the loader's older
 * value must never land over the write, and no caller that comes after the write is answered
 * from before it — not from the running flight, not from a stale value being refreshed. On the
 * in-process store and on Redis (the writer being another cache with its own connection, as
 * another process would be).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createCache, type CacheOptions, type DogpileCache } from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';

const server = useRedis();

/** Well past one pub/sub delivery on a loaded machine, far below every TTL here. */
const DELIVERY_BOUND_MS = 1_000;

function gate(): { open: () => void; wait: Promise<void> } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { open, wait };
}

describe.each(['memory', 'redis'] as const)('on the %s store', (store) => {
  let clients: Redis[] = [];
  let reader: DogpileCache;
  let writer: DogpileCache;
  const make = (extra: CacheOptions = {}) => {
    if (store === 'memory') return createCache(extra);
    const client = server.client();
    clients.push(client);
    return createCache({ redis: client, ...extra });
  };

  beforeAll(() => {
    reader = make({ staleWhileRevalidate: 60_000 });
    // On the in-process store there is one store per cache: the writer is the reader.
    writer = store === 'memory' ? reader : make({ staleWhileRevalidate: 60_000 });
  });

  afterAll(async () => {
    await reader.close();
    if (writer !== reader) await writer.close();
    clients = [];
  });

  for (const write of ['set', 'delete'] as const) {
    it(`a ${write} that resolves while a loader runs is not undone by the loader's value`, async () => {
      const key = freshId(`during-${write}`);
      const loader = gate();
      const started = gate();
      // The database the loader reads: it reads, then takes a while to return what it read.
      let db = 'before the write';
      const reading = reader.getOrCompute(key, async () => {
        const read = db;
        started.open();
        await loader.wait;
        return read;
      }, 60_000);
      await started.wait;
      // The data changes, and the cache is told.
      db = write === 'set' ? 'the write' : 'loaded after the write';
      if (write === 'set') await writer.set(key, 'the write', 60_000);
      else await writer.delete(key);
      // In the writing process a caller after the write does not wait for the run begun before
      // it (in another process, callers that wait for that run get its value, as documented).
      const after = writer.getOrCompute(key, () => 'loaded after the write', 60_000);
      loader.open();
      // The callers that waited for the run get its value: they overlapped the write.
      expect(await reading).toBe('before the write');
      const expected = write === 'set' ? 'the write' : 'loaded after the write';
      if (writer === reader || write === 'set') expect(await after).toBe(expected);
      else await after;
      // What is stored is never the run's older value.
      await waitUntil('every cache sees the write', async () => (await reader.get(key)) !== 'before the write' && (await writer.get(key)) !== 'before the write', DELIVERY_BOUND_MS);
      for (const cache of [reader, writer]) expect(await cache.get(key)).not.toBe('before the write');
      if (write === 'set') expect(await reader.get(key)).toBe('the write');
    });
  }

  it('a stale value being refreshed is not answered once a write resolved', async () => {
    const key = freshId('refreshing');
    await reader.getOrCompute(key, () => 'version 1', 100);
    await sleep(150);
    const refresh = gate();
    const slow = async () => {
      await refresh.wait;
      return 'the refresh';
    };
    // Stale: answered at once, and this process refreshes in the background (held by the gate).
    expect(await reader.resolve(key, slow, 100)).toMatchObject({ value: 'version 1', status: 'stale' });
    // A second stale answer while the refresh runs (on Redis it also confirms the stale value is still stored).
    expect((await reader.resolve(key, slow, 100)).value).toBe('version 1');
    await writer.set(key, 'version 2', 60_000);
    try {
      await waitUntil('the write is answered', async () => (await reader.resolve(key, slow, 100)).value === 'version 2', DELIVERY_BOUND_MS);
      for (let i = 0; i < 5; i++) expect((await reader.resolve(key, slow, 100)).value).toBe('version 2');
    } finally {
      refresh.open();
    }
    // The refresh began before the write: its result is not stored over it.
    await sleep(100);
    expect(await writer.get(key)).toBe('version 2');
  });
});
