/**
 * Sizes that come from outside the process are bounded where they enter, on a real Redis:
 * a compressed entry that inflates past `DECOMPRESSED_MAX_BYTES` (written straight into Redis)
 * is a corrupt entry (a miss, reported, replaced by the loader) and never inflates beyond it,
 * while one just under it still reads (for zstd in a Node 26 child process when this Node has
 * none), and a value too large to compress within it is stored uncompressed; a value announced
 * inline on a key's channel past `inlineMax` is not decoded (a notification only: the waiter
 * reads Redis, the L1 copy is dropped); and the keys followed
 * while other processes refresh them stay within `FOLLOWED_MAX` keys and `FOLLOWED_MAX_BYTES`
 * after every batch of a burst (counted in the class's subscriber and on the server), a single
 * key longer than the byte budget never being followed at all.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import * as zlib from 'node:zlib';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCache, type CacheEvents, type DogpileCache } from '../src/index.js';
import { EntryCodec } from '../src/store/codec.js';
import { CorruptEntryError, decodeEntry, encodeEntry, EntryKind } from '../src/store/entry.js';
import { cacheKeys, valueKey } from '../src/store/key.js';
import { portableSerializer } from '../src/store/serializer.js';
import { DECOMPRESSED_MAX_BYTES, hasAlgorithm, type CompressionAlgorithm } from '../src/store/compression.js';
import { existingSharedSubscriber } from '../src/redis/subscriber.js';
import { FOLLOWED_MAX, FOLLOWED_MAX_BYTES, RefreshingElsewhere } from '../src/core/refreshing-elsewhere.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import { keyHintSize } from '../src/shared/keys.js';
import { monotonicNow } from '../src/shared/clock.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { JsonChild, killAllChildren, root } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();
let redis: Redis;
const caches: DogpileCache[] = [];
const clients: Redis[] = [];

beforeAll(() => {
  redis = server.client();
});
afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
  await Promise.all(clients.splice(0).map((c) => c.quit().catch(() => undefined)));
});
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.quit().catch(() => undefined)));
  await killAllChildren();
});

function cacheOn(options: Parameters<typeof createCache>[0] = {}): DogpileCache {
  const cache = createCache({ redis: server.client(), ...options });
  caches.push(cache);
  return cache;
}

function record<E extends keyof CacheEvents>(cache: DogpileCache, event: E): CacheEvents[E][0][] {
  const seen: CacheEvents[E][0][] = [];
  (cache.on as (e: E, l: (info: CacheEvents[E][0]) => void) => void)(event, (info) => seen.push(info));
  return seen;
}

/** The Redis server's time, ms since the epoch (the fleet's one clock). */
async function serverNow(): Promise<number> {
  const [s, us] = (await redis.call('TIME')) as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** A value as a short text (a 64 MB string is not printed in a failure). */
function shown(value: unknown): string {
  if (typeof value === 'string' && value.length > 100) return `a string of ${value.length} characters`;
  return value === undefined ? 'undefined' : JSON.stringify(value);
}

const ALGORITHMS = (['zstd', 'brotli', 'gzip'] as const).filter(hasAlgorithm);
const MB = 1024 * 1024;

/** The serializer's bytes of `value`, compressed with `algorithm` the way zlib does by default (a bomb compresses well). */
function squeeze(algorithm: CompressionAlgorithm, plain: Buffer): Buffer {
  if (algorithm === 'gzip') return zlib.gzipSync(plain, { level: 9 });
  if (algorithm === 'brotli') return zlib.brotliCompressSync(plain, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } });
  return (zlib as unknown as { zstdCompressSync: (b: Buffer) => Buffer }).zstdCompressSync(plain);
}

/** A value entry whose payload is `plain` compressed with `algorithm`, as a writer of this library would name it. */
async function compressedEntry(algorithm: CompressionAlgorithm, plain: Buffer): Promise<Buffer> {
  return encodeEntry(EntryKind.Value, await serverNow(), 60_000, squeeze(algorithm, plain), { serializer: portableSerializer.name, compression: algorithm });
}

/** A string whose portable serialization is exactly `bytes` long (a few bytes of framing around its characters). */
function stringOfSize(bytes: number): { value: string; plain: Buffer } {
  const framing = portableSerializer.serialize('').length;
  let value = 'a'.repeat(bytes - framing);
  let plain = Buffer.from(portableSerializer.serialize(value));
  // The framing may grow with the length (a length prefix): shrink until it fits.
  while (plain.length > bytes) {
    value = value.slice(0, value.length - (plain.length - bytes));
    plain = Buffer.from(portableSerializer.serialize(value));
  }
  return { value, plain };
}

describe('a compressed entry that inflates past DECOMPRESSED_MAX_BYTES', () => {
  it('the bound is documented in bytes and below the 64 MB bombs used here', () => {
    expect(DECOMPRESSED_MAX_BYTES).toBe(16 * MB);
    expect(64 * MB).toBeGreaterThan(DECOMPRESSED_MAX_BYTES);
  });

  describe.each(ALGORITHMS)('with %s', (algorithm) => {
    it('a 64 MB bomb written straight into Redis is a corrupt miss: reported, the loader runs, its value replaces the bomb', async () => {
      const prefix = freshId('bomb');
      const { plain } = stringOfSize(64 * MB);
      const bomb = await compressedEntry(algorithm, plain);
      expect(bomb.length).toBeLessThan(MB);
      await redis.set(valueKey(prefix, 'k'), bomb, 'PX', 60_000);

      const cache = cacheOn({ prefix });
      const corrupt = record(cache, 'corrupt');
      // A plain read: a miss, reported.
      expect(shown(await cache.get('k'))).toBe('undefined');
      expect(corrupt).toHaveLength(1);
      expect(corrupt[0]!.key).toBe('k');
      expect(corrupt[0]!.error).toBeInstanceOf(CorruptEntryError);
      expect(corrupt[0]!.error.message).toContain(`more than ${DECOMPRESSED_MAX_BYTES} bytes`);
      expect(corrupt[0]!.error.message).toContain(algorithm);
      // zlib itself stopped at the bound (maxOutputLength): nothing past it was allocated.
      expect((corrupt[0]!.error.cause as { code?: string } | undefined)?.code).toBe('ERR_BUFFER_TOO_LARGE');

      // Through the miss protocol: reported again, the loader runs once, and its value replaces the bomb.
      let runs = 0;
      expect(shown(await cache.getOrCompute('k', () => (runs++, 'loaded'), 60_000))).toBe('"loaded"');
      expect(runs).toBe(1);
      expect(corrupt.length).toBeGreaterThanOrEqual(2);
      expect(corrupt.every((c) => c.error instanceof CorruptEntryError)).toBe(true);
      const reader = cacheOn({ prefix });
      expect(await reader.get('k')).toBe('loaded');
    });

    it('an entry that inflates to just under the bound still reads', async () => {
      const prefix = freshId('under');
      const { value, plain } = stringOfSize(DECOMPRESSED_MAX_BYTES - 16);
      await redis.set(valueKey(prefix, 'k'), await compressedEntry(algorithm, plain), 'PX', 60_000);
      const cache = cacheOn({ prefix });
      const corrupt = record(cache, 'corrupt');
      const read = (await cache.get('k')) as string;
      expect(read.length).toBe(value.length);
      expect(read === value).toBe(true);
      expect(corrupt).toEqual([]);
    });

    it('a value whose serialised bytes exceed the bound is stored uncompressed (every reader can inflate what is written)', async () => {
      const prefix = freshId('big');
      const cache = cacheOn({ prefix, compression: { threshold: 0, algorithm } });
      const { value } = stringOfSize(DECOMPRESSED_MAX_BYTES + 1024);
      await cache.set('big', value, 60_000);
      await cache.set('small', 'b'.repeat(100_000), 60_000);
      const big = await redis.getBuffer(valueKey(prefix, 'big'));
      expect(decodeEntry(big!).compression).toBeUndefined();
      expect(decodeEntry((await redis.getBuffer(valueKey(prefix, 'small')))!).compression).toBe(algorithm);
      const reader = cacheOn({ prefix });
      const corrupt = record(reader, 'corrupt');
      expect(((await reader.get('big')) as string) === value).toBe(true);
      expect(await reader.get('small')).toBe('b'.repeat(100_000));
      expect(corrupt).toEqual([]);
    });
  });
});

// This Node has no zstd (before 22.15 / 23.8): the zstd cases run in a process of Node 26.
describe.skipIf(hasAlgorithm('zstd'))('a zstd entry past the bound, read by a runtime with zstd', () => {
  let node = '';
  beforeAll(() => {
    node = execFileSync('npx', ['-y', '-p', 'node@26', '-c', 'command -v node'], { cwd: root, encoding: 'utf8' }).trim();
  }, 300_000);

  it('a 64 MB bomb is a corrupt miss (zlib stopped at the bound), the loader runs; just under the bound reads', async () => {
    const prefix = freshId('zstd');
    const worker = new JsonChild('zstd reader', ['--import', 'tsx', path.join(root, 'test/fixtures/hardening4-zstd-worker.ts'), '--config', JSON.stringify({ url: server.url, prefix })], { command: node });
    try {
      expect(await worker.take('ready', 60_000)).toMatchObject({ zstd: true });
      worker.send({ cmd: 'read', key: 'bomb', plainBytes: 64 * MB });
      const bomb = await worker.take('done', 60_000);
      expect(bomb.stored as number).toBeLessThan(MB);
      expect(bomb).toMatchObject({ got: 'undefined', loaded: 'loaded', runs: 1 });
      const corrupt = bomb.corrupt as { name: string; message: string; cause: string }[];
      expect(corrupt.length).toBeGreaterThanOrEqual(1);
      expect(corrupt[0]).toMatchObject({ name: 'CorruptEntryError', cause: 'ERR_BUFFER_TOO_LARGE' });
      expect(corrupt[0]!.message).toContain(`zstd bytes decompress to more than ${DECOMPRESSED_MAX_BYTES} bytes`);
      worker.send({ cmd: 'read', key: 'under', plainBytes: DECOMPRESSED_MAX_BYTES - 16 });
      expect(await worker.take('done', 60_000)).toMatchObject({ got: 'the value', runs: 0, corrupt: [] });
    } finally {
      await worker.exit();
    }
  }, 120_000);
});

describe('a value announced inline on a key\'s channel past inlineMax', () => {
  const INLINE_MAX = 4096;

  /** The bytes of a value entry of `value`, created now on the server's clock. */
  async function entryOf(value: unknown): Promise<Buffer> {
    return new EntryCodec(portableSerializer).encode('k', { kind: EntryKind.Value, value, createdAt: await serverNow(), ttl: 60_000 });
  }

  it('is not taken by a waiter: a corrupt event, and the waiter reads the value from Redis', async () => {
    const prefix = freshId('inline-wait');
    const keys = cacheKeys(prefix, 'k');
    const cache = cacheOn({ prefix, inlineMax: INLINE_MAX, waitTimeout: 20_000 });
    const corrupt = record(cache, 'corrupt');
    // Another process leads: this cache's call waits on the key's channel.
    await redis.set(keys.lock, 'another-process', 'PX', 15_000);
    let runs = 0;
    const call = cache.getOrCompute('k', () => (runs++, 'loaded'), 60_000);
    await waitUntil('the waiter to follow the key\'s channel', async () => {
      const [, n] = (await redis.call('PUBSUB', 'NUMSUB', keys.channel)) as [string, number];
      return Number(n) > 0;
    });
    // What Redis holds, then an announcement carrying another value too large to be inline.
    await redis.set(keys.value, await entryOf('in redis'), 'PX', 60_000);
    await redis.del(keys.lock);
    const huge = await entryOf('x'.repeat(INLINE_MAX * 4));
    expect(huge.length).toBeGreaterThan(INLINE_MAX);
    await redis.publish(keys.channel, Buffer.concat([Buffer.from('v'), huge]));
    expect(await call).toBe('in redis');
    expect(runs).toBe(0);
    expect(corrupt).toHaveLength(1);
    expect(corrupt[0]!.error).toBeInstanceOf(CorruptEntryError);
    expect(corrupt[0]!.error.message).toContain(`inlineMax (${INLINE_MAX})`);
  });

  it('is not kept in L1: the copy is dropped and the next read goes to Redis', async () => {
    const prefix = freshId('inline-l1');
    const keys = cacheKeys(prefix, 'k');
    const cache = cacheOn({ prefix, inlineMax: INLINE_MAX, l1: { max: 100, ttl: 60_000 } });
    const hits = record(cache, 'hit');
    /** One read: its value and the layer that answered it. */
    const read = async () => {
      hits.length = 0;
      const { value } = await cache.resolve('k', () => 'loaded', 60_000);
      return { value, layer: hits[0]?.layer };
    };
    expect((await read()).value).toBe('loaded');
    await waitUntil('the L1 copy to be a hit', async () => (await read()).layer === 'l1');
    await redis.publish(keys.channel, Buffer.concat([Buffer.from('v'), await entryOf('x'.repeat(INLINE_MAX * 4))]));
    // The copy is dropped: the next read goes to Redis, which still holds the value.
    const after = await waitUntil('the oversized announcement to be handled', async () => {
      const r = await read();
      return r.layer === 'l1' && r.value === 'loaded' ? undefined : r;
    });
    expect({ value: shown(after.value), layer: after.layer }).toEqual({ value: '"loaded"', layer: 'store' });
    // Within the bound, an announced value is still taken inline.
    await redis.publish(keys.channel, Buffer.concat([Buffer.from('v'), await entryOf('small inline')]));
    await waitUntil('the small announcement to be kept', async () => {
      const r = await read();
      return r.value === 'small inline' && r.layer === 'l1';
    });
  });
});

describe('keys followed while other processes refresh them', () => {
  const OTHER = 'another-process';

  /** `keys` written straight into Redis: past their 20 ms TTL, inside a 10 min stale window, their refresh led by another process. */
  async function staleLedElsewhere(prefix: string, keys: string[]): Promise<void> {
    const codec = new EntryCodec(portableSerializer);
    const now = await serverNow();
    for (let i = 0; i < keys.length; i += 500) {
      const pipeline = redis.pipeline();
      for (const key of keys.slice(i, i + 500)) {
        const k = cacheKeys(prefix, key);
        pipeline.set(k.value, codec.encode(key, { kind: EntryKind.Value, value: 'v0', createdAt: now - 1000, ttl: 20, stale: 600_000 }), 'PX', 600_000);
        pipeline.set(k.lock, OTHER, 'PX', 120_000);
      }
      await pipeline.exec();
    }
  }

  /** A follower cache on its own named client, so its subscriber connection is told apart on the server. */
  function follower(prefix: string): { cache: DogpileCache; client: Redis; name: string } {
    const name = freshId('follower');
    const client = new Redis(server.url, { connectionName: name, lazyConnect: false });
    clients.push(client);
    const cache = createCache({ redis: client, prefix, staleWhileRevalidate: '10m', lockTtl: 30_000 });
    caches.push(cache);
    return { cache, client, name };
  }

  /** Channels the server counts for the connection named `name` (`sub=` of CLIENT LIST). */
  async function serverChannels(name: string): Promise<number> {
    const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
    let total = 0;
    for (const line of list.split('\n')) {
      if (!line.includes(` name=${name} `)) continue;
      total += Number(/ sub=(\d+)/.exec(line)?.[1] ?? 0);
    }
    return total;
  }

  /**
   * The channels `client`'s subscriber holds besides keys' channels (the cache's generation
   * stamp): a first read of a key that is not stale makes the follower subscribe to them.
   */
  async function baseline(cache: DogpileCache, client: Redis, name: string): Promise<{ subscriber: number; server: number }> {
    await cache.get(freshId('absent'));
    const subscriber = existingSharedSubscriber(client)?.channelCount ?? 0;
    return { subscriber, server: await waitUntil('the baseline subscriptions', async () => (await serverChannels(name)) === subscriber && subscriber) };
  }

  const neverLoads = () => {
    throw new Error('the follower never loads: another process leads');
  };

  it(`a burst of stale keys 200 at a time: after every batch at most ${FOLLOWED_MAX} channels are followed, on the subscriber and on the server`, async () => {
    const prefix = freshId('burst');
    // 409 characters: within the byte budget by count (FOLLOWED_MAX of them fit in FOLLOWED_MAX_BYTES), so the count binds.
    const keys = Array.from({ length: 3 * FOLLOWED_MAX }, (_, i) => `${'k'.repeat(400)}${String(i).padStart(9, '0')}`);
    expect(keys[0]!.length).toBe(409);
    expect(FOLLOWED_MAX * keyHintSize(keys[0]!)).toBeLessThanOrEqual(FOLLOWED_MAX_BYTES);
    await staleLedElsewhere(prefix, keys);
    const { cache, client, name } = follower(prefix);
    const base = await baseline(cache, client, name);
    const seen: { batch: number; subscriber: number; server: number }[] = [];
    for (let i = 0; i < keys.length; i += 200) {
      const answers = await Promise.all(keys.slice(i, i + 200).map((k) => cache.resolve(k, neverLoads, 20)));
      expect(answers.every((r) => r.status === 'stale' && r.value === 'v0')).toBe(true);
      seen.push({ batch: i / 200, subscriber: (existingSharedSubscriber(client)?.channelCount ?? 0) - base.subscriber, server: (await serverChannels(name)) - base.server });
    }
    // The follower did follow keys (the bound is reached, not avoided)...
    expect(Math.max(...seen.map((s) => s.subscriber))).toBe(FOLLOWED_MAX);
    // ...and never more than the bound, after any batch.
    expect(seen.filter((s) => s.subscriber > FOLLOWED_MAX || s.server > FOLLOWED_MAX)).toEqual([]);
    // Once every subscription is confirmed, the server holds exactly what the subscriber does.
    await waitUntil('the server to confirm the subscriptions', async () => (await serverChannels(name)) - base.server === FOLLOWED_MAX);
  }, 120_000);

  it('the follower itself: after every key it is told of, the channels it holds (confirmed or not) and their key text are within the bounds', async () => {
    const prefix = freshId('direct');
    const client = server.client();
    const backend = new RedisBackend(client, { prefix, codec: new EntryCodec(portableSerializer), inlineMax: 65_536, l1: undefined });
    const elsewhere = new RefreshingElsewhere(backend);
    const onServer = async () => ((await redis.call('PUBSUB', 'CHANNELS', `${prefix}:c:*`)) as string[]).length;
    try {
      // 409 characters: the count binds; 4000: the bytes bind (about 130 such keys fit).
      for (const length of [409, 4000]) {
        const fits = Math.min(FOLLOWED_MAX, Math.floor(FOLLOWED_MAX_BYTES / keyHintSize('k'.repeat(length))));
        const keys = Array.from({ length: 3 * fits }, (_, i) => `${'k'.repeat(length - 9)}${String(i).padStart(9, '0')}`);
        const entry = { kind: EntryKind.Value, value: 'v0', createdAt: (await serverNow()) - 1000, ttl: 20, stale: 600_000 };
        let most = { channels: 0, bytes: 0, subscriber: 0, server: 0 };
        for (let i = 0; i < keys.length; i += 200) {
          // A batch told at once, before any of its subscriptions is confirmed.
          for (const key of keys.slice(i, i + 200)) {
            elsewhere.heard(key, entry, 60_000, monotonicNow());
            const now = elsewhere.following;
            const subscriber = existingSharedSubscriber(client)?.channelCount ?? 0;
            most = { channels: Math.max(most.channels, now.channels), bytes: Math.max(most.bytes, now.bytes), subscriber: Math.max(most.subscriber, subscriber), server: most.server };
          }
          await sleep(20);
          most.server = Math.max(most.server, await onServer());
        }
        expect(most).toEqual({ channels: fits, bytes: fits * keyHintSize(keys[0]!), subscriber: fits, server: fits });
        elsewhere.clear();
        await waitUntil('every channel let go', async () => (await onServer()) === 0 && (existingSharedSubscriber(client)?.channelCount ?? 0) === 0);
        expect(elsewhere.following).toEqual({ channels: 0, bytes: 0 });
      }
    } finally {
      elsewhere.clear();
    }
  }, 60_000);

  it('a key longer than the byte budget is never followed, and costs the keys already followed nothing', async () => {
    const prefix = freshId('long');
    const long = `${'l'.repeat(600_000)}-${freshId('k')}`;
    expect(keyHintSize(long)).toBeGreaterThan(FOLLOWED_MAX_BYTES);
    const short = freshId('short');
    await staleLedElsewhere(prefix, [long, short]);
    const { cache, client, name } = follower(prefix);
    const base = await baseline(cache, client, name);
    const numsub = async (key: string) => Number(((await redis.call('PUBSUB', 'NUMSUB', cacheKeys(prefix, key).channel)) as [string, number])[1]);
    expect(await cache.resolve(short, neverLoads, 20)).toMatchObject({ status: 'stale', value: 'v0' });
    await waitUntil('the short key to be followed', async () => (await numsub(short)) === 1);
    expect(await cache.resolve(long, neverLoads, 20)).toMatchObject({ status: 'stale', value: 'v0' });
    // Not followed, and nothing let go to make room for it: the short key's channel is still the only one.
    expect(existingSharedSubscriber(client)?.channelCount).toBe(base.subscriber + 1);
    expect(await numsub(long)).toBe(0);
    expect(await numsub(short)).toBe(1);
    expect(await serverChannels(name)).toBe(base.server + 1);
  }, 60_000);
});
