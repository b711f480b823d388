/**
 * `compression: { threshold, algorithm }`: on a real Redis, values whose serialised bytes exceed
 * the threshold are stored compressed (the raw bytes in Redis name the algorithm and are fewer),
 * smaller or incompressible ones are not; every process reads them whatever its own setting,
 * across real child processes too (and, where one runtime has zstd and the other has not, the
 * one without treats a zstd entry as a corrupt entry: a miss, reported, replaced); corrupted
 * compressed bytes are a corrupt entry; bad options are refused naming the option.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import * as zlib from 'node:zlib';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, SerializationError, type CacheEvents, type DogpileCache } from '../src/index.js';
import { dogpileGuard } from '../src/express/index.js';
import { EntryCodec } from '../src/store/codec.js';
import { CorruptEntryError, decodeEntry, EntryKind, HEADER_SIZE_V3 } from '../src/store/entry.js';
import { storedSize } from '../src/store/entry-size.js';
import { valueKey } from '../src/store/key.js';
import { jsonSerializer, portableSerializer } from '../src/store/serializer.js';
import { defaultAlgorithm, hasAlgorithm, type CompressionAlgorithm } from '../src/store/compression.js';
import { JsonChild, killAllChildren, root } from '../tools/child-process.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';
import { records } from './fixtures/compression-values.js';

const server = useRedis();
const ALGORITHMS = (['zstd', 'brotli', 'gzip'] as const).filter(hasAlgorithm);

function record<E extends keyof CacheEvents>(cache: DogpileCache, event: E): CacheEvents[E][0][] {
  const seen: CacheEvents[E][0][] = [];
  (cache.on as (e: E, l: (info: CacheEvents[E][0]) => void) => void)(event, (info) => seen.push(info));
  return seen;
}

async function raw(prefix: string, key: string): Promise<Buffer> {
  const bytes = await server.client().getBuffer(valueKey(prefix, key));
  if (bytes === null) throw new Error(`nothing stored under ${key}`);
  return bytes;
}

/** What a cache with default settings reads under `key`. */
async function expectRead(prefix: string, key: string, expected: unknown): Promise<void> {
  const reader = createCache({ redis: server.client(), prefix });
  try {
    expect(await reader.get(key)).toEqual(expected);
  } finally {
    await reader.close();
  }
}

/** The serializer's bytes of `value` (what an uncompressed entry carries). */
const plainSize = (value: unknown) => portableSerializer.serialize(value).length;

describe('compression options', () => {
  it('refuses bad input naming the option, at createCache, and writes nothing', async () => {
    const prefix = freshId('bad');
    const cases: [unknown, string][] = [
      ['yes', 'compression'],
      [1, 'compression'],
      [null, 'compression'],
      [[], 'compression'],
      [{ threshold: -1 }, 'compression.threshold'],
      [{ threshold: 1.5 }, 'compression.threshold'],
      [{ threshold: Number.NaN }, 'compression.threshold'],
      [{ threshold: Number.POSITIVE_INFINITY }, 'compression.threshold'],
      [{ threshold: '1024' }, 'compression.threshold'],
      [{ algorithm: 'lz4' }, 'compression.algorithm'],
      [{ algorithm: 'Brotli' }, 'compression.algorithm'],
      [{ algorithm: 3 }, 'compression.algorithm'],
      [{ level: 3 }, 'compression.level'],
    ];
    if (!hasAlgorithm('zstd')) cases.push([{ algorithm: 'zstd' }, 'compression.algorithm']);
    for (const [compression, option] of cases) {
      let thrown: unknown;
      try {
        createCache({ redis: server.url, prefix, compression: compression as boolean });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(compression)).toBeInstanceOf(InvalidOptionError);
      expect((thrown as InvalidOptionError).option, JSON.stringify(compression)).toBe(option);
      expect((thrown as Error).message).toContain(option);
    }
    if (!hasAlgorithm('zstd')) expect(() => createCache({ redis: server.url, prefix, compression: { algorithm: 'zstd' } })).toThrow(/Node 22\.15/);
    expect(await server.client().keys(`${prefix}*`)).toEqual([]);
  });

  it('true takes the defaults (threshold 1024, the best algorithm the runtime has); false or nothing: off', async () => {
    const resolved = async (compression?: unknown) => {
      const cache = createCache(compression === undefined ? {} : { compression: compression as boolean });
      const options = cache.options.compression;
      await cache.close();
      return options;
    };
    expect(await resolved(true)).toEqual({ threshold: 1024, algorithm: defaultAlgorithm() });
    expect(defaultAlgorithm()).toBe(hasAlgorithm('zstd') ? 'zstd' : 'brotli');
    expect(await resolved({ algorithm: 'gzip' })).toEqual({ threshold: 1024, algorithm: 'gzip' });
    expect(await resolved({ threshold: 0 })).toEqual({ threshold: 0, algorithm: defaultAlgorithm() });
    expect(await resolved(false)).toBeUndefined();
    expect(await resolved()).toBeUndefined();
  });
});

describe.each(ALGORITHMS)('compression with %s on a real Redis', (algorithm: CompressionAlgorithm) => {
  it('stores a large value compressed (the header names the algorithm, the bytes are fewer), a small or incompressible one not', async () => {
    const prefix = freshId('big');
    const cache = createCache({ redis: server.client(), prefix, compression: { threshold: 1024, algorithm } });
    const large = records(200);
    const small = records(2);
    const noise = { bytes: randomBytes(8192) };
    expect(await cache.getOrCompute('large', () => large, 60_000)).toEqual(large);
    expect(await cache.getOrCompute('small', () => small, 60_000)).toEqual(small);
    expect(await cache.getOrCompute('noise', () => noise, 60_000)).toEqual(noise);

    const bytes = await raw(prefix, 'large');
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 4, 1]);
    const name = `portable;${algorithm}`;
    expect(bytes.toString('latin1', HEADER_SIZE_V3 + 1, HEADER_SIZE_V3 + 1 + bytes[HEADER_SIZE_V3]!)).toBe(name);
    expect(decodeEntry(bytes)).toMatchObject({ serializer: 'portable', compression: algorithm });
    expect(bytes.length * 4).toBeLessThan(plainSize(large));

    expect(plainSize(small)).toBeLessThanOrEqual(1024);
    expect(decodeEntry(await raw(prefix, 'small'))).toMatchObject({ serializer: 'portable' });
    expect(decodeEntry(await raw(prefix, 'small')).compression).toBeUndefined();
    const noisy = await raw(prefix, 'noise');
    expect(decodeEntry(noisy).compression).toBeUndefined();
    expect(noisy.length).toBeGreaterThan(8192);
    await cache.close();
  });

  it('compresses what set, setMany and getOrCompute write; a cache with compression off, and one with another algorithm, read it', async () => {
    const prefix = freshId('paths');
    const writer = createCache({ redis: server.client(), prefix, compression: { threshold: 100, algorithm } });
    await writer.set('set', records(50, 1), 60_000);
    await writer.setMany([
      { key: 'many1', value: records(50, 2) },
      { key: 'many2', value: records(50, 3), tags: ['t'] },
    ], { ttl: 60_000 });
    await writer.getOrCompute('computed', () => records(50, 4), { ttl: 60_000, tags: ['t'], staleWhileRevalidate: 10_000 });
    const expected: Record<string, unknown> = { set: records(50, 1), many1: records(50, 2), many2: records(50, 3), computed: records(50, 4) };
    for (const key of Object.keys(expected)) expect(decodeEntry(await raw(prefix, key)).compression, key).toBe(algorithm);
    // A namespace compresses as its cache does.
    await writer.namespace('ns').set('inner', records(50, 5), 60_000);
    const inner = await server.client().keys(`${prefix}:n/ns:v:*`);
    expect(inner).toHaveLength(1);
    expect(decodeEntry((await server.client().getBuffer(inner[0]!))!).compression).toBe(algorithm);

    const other = ALGORITHMS.find((a) => a !== algorithm)!;
    for (const compression of [false, { algorithm: other }] as const) {
      const reader = createCache({ redis: server.client(), prefix, compression, l1: true });
      const corrupt = record(reader, 'corrupt');
      for (const key of Object.keys(expected)) expect(await reader.get(key), `${key} ${JSON.stringify(compression)}`).toEqual(expected[key]);
      expect(await reader.getMany(Object.keys(expected))).toEqual(Object.values(expected));
      let runs = 0;
      expect(await reader.getOrCompute('computed', () => ++runs, 60_000)).toEqual(expected.computed);
      expect(runs).toBe(0);
      expect(corrupt).toEqual([]);
      await reader.close();
    }
    // Tags still apply to a compressed entry.
    await writer.invalidateTags(['t']);
    expect(await writer.get('many2')).toBeUndefined();
    expect(await writer.get('many1')).toEqual(expected.many1);
    await writer.close();
  });
});

describe('the threshold', () => {
  it('compresses serialised bytes longer than it, not as long', () => {
    const value = records(20);
    const length = plainSize(value);
    const entry = () => ({ kind: EntryKind.Value, value, createdAt: 1, ttl: 1000 });
    for (const algorithm of ALGORITHMS) {
      expect(decodeEntry(new EntryCodec(portableSerializer, { threshold: length, algorithm }).encode('k', entry())).compression).toBeUndefined();
      expect(decodeEntry(new EntryCodec(portableSerializer, { threshold: length - 1, algorithm }).encode('k', entry())).compression).toBe(algorithm);
    }
  });
});

describe('a serializer without a name', () => {
  it('writes a compressed entry naming the algorithm alone (";gzip"), read with the reader\'s serializer; a small value stays format 1', () => {
    const unnamed = { serialize: jsonSerializer.serialize, deserialize: jsonSerializer.deserialize };
    const codec = new EntryCodec(unnamed, { threshold: 1024, algorithm: 'gzip' });
    const large = codec.encode('k', { kind: EntryKind.Value, value: records(50), createdAt: 1, ttl: 1000 });
    expect(large.toString('latin1', HEADER_SIZE_V3 + 1, HEADER_SIZE_V3 + 1 + large[HEADER_SIZE_V3]!)).toBe(';gzip');
    const header = decodeEntry(large);
    expect(header.serializer).toBeUndefined();
    expect(header.compression).toBe('gzip');
    const decoded = new EntryCodec(unnamed).decode(large);
    expect('error' in decoded ? decoded.error : decoded.value).toEqual(records(50));
    expect(codec.encode('k', { kind: EntryKind.Value, value: records(1), createdAt: 1, ttl: 1000 })[2]).toBe(1);
  });
});

describe('HTTP responses stored through a compressing cache', () => {
  const servers: import('node:http').Server[] = [];
  afterAll(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });
  async function app(cache: DogpileCache, onRun: () => void): Promise<number> {
    const a = express();
    // One key for both apps (the default key names the host, and each app has its own port).
    a.use(dogpileGuard({ cache, key: (req) => `report:${req.path}` }));
    a.get('/report', (_req, res) => {
      onRun();
      res.json(records(100));
    });
    const s = a.listen(0, '127.0.0.1');
    servers.push(s);
    await new Promise((r) => s.once('listening', r));
    return (s.address() as AddressInfo).port;
  }

  it('are stored compressed and served by an app whose cache does not compress', async () => {
    const prefix = freshId('http');
    let runs = 0;
    const compressing = createCache({ redis: server.client(), prefix, compression: { threshold: 1024, algorithm: 'gzip' } });
    const plain = createCache({ redis: server.client(), prefix });
    const first = await app(compressing, () => runs++);
    const second = await app(plain, () => runs++);
    const a = await fetchReply(first, '/report');
    expect(a.xCache).toBe('MISS');
    expect(JSON.parse(a.text)).toEqual(records(100));
    const keys = await server.client().keys(`${prefix}:v:*`);
    expect(keys.length).toBeGreaterThan(0);
    const entries = await Promise.all(keys.map(async (k) => (await server.client().getBuffer(k))!));
    const stored = entries.map((bytes) => decodeEntry(bytes)).filter((e) => e.kind === EntryKind.Value);
    expect(stored.some((e) => e.compression === 'gzip')).toBe(true);
    expect(Math.max(...entries.map((b) => b.length)) * 4).toBeLessThan(Buffer.byteLength(a.text));
    const b = await fetchReply(second, '/report');
    expect(b.xCache).toBe('HIT');
    expect(b.text).toBe(a.text);
    expect(runs).toBe(1);
    await Promise.all([compressing.close(), plain.close()]);
  });
});

describe('unreadable compressed entries', () => {
  it('corrupted compressed bytes are a corrupt entry: a miss, reported, replaced by the next load', async () => {
    const prefix = freshId('corrupt');
    // gzip: its stream carries a checksum, so any change is caught by the decompressor itself.
    const cache = createCache({ redis: server.client(), prefix, compression: { threshold: 0, algorithm: 'gzip' } });
    const corrupt = record(cache, 'corrupt');
    await cache.set('k', records(100), 60_000);
    const bytes = await raw(prefix, 'k');
    const header = bytes.length - decodeEntry(bytes).payload.length;
    const broken = Buffer.from(bytes);
    for (let i = header; i < broken.length; i += 7) broken[i] = broken[i]! ^ 0x5a;
    await server.client().set(valueKey(prefix, 'k'), broken);
    expect(await cache.get('k')).toBeUndefined();
    expect(corrupt).toHaveLength(1);
    expect(corrupt[0]!.error).toBeInstanceOf(CorruptEntryError);
    expect(corrupt[0]!.error.message).toMatch(/gzip bytes do not decompress/);
    expect(await cache.getOrCompute('k', () => records(3), 60_000)).toEqual(records(3));
    expect(corrupt.length).toBeGreaterThanOrEqual(2);
    await expectRead(prefix, 'k', records(3));
    await cache.close();
  });

  it('an entry naming an algorithm this runtime lacks is a SerializationError naming it, treated as a corrupt entry', async () => {
    const prefix = freshId('lacks');
    const cache = createCache({ redis: server.client(), prefix, compression: true });
    const corrupt = record(cache, 'corrupt');
    const missing = ['lz4', ...(hasAlgorithm('zstd') ? [] : ['zstd'])];
    for (const algorithm of missing) {
      const codec = new EntryCodec(portableSerializer);
      const plain = codec.encode('k', { kind: EntryKind.Value, value: 'x', createdAt: Date.now(), ttl: 60_000 });
      // The same entry, its name field saying the payload is compressed with `algorithm`.
      const at = HEADER_SIZE_V3;
      const name = Buffer.from(`portable;${algorithm}`, 'latin1');
      const forged = Buffer.concat([plain.subarray(0, at), Buffer.from([name.length]), name, plain.subarray(at + 1 + plain[at]!)]);
      expect(decodeEntry(forged)).toMatchObject({ serializer: 'portable', compression: algorithm });
      const decoded = codec.decode(forged);
      expect('error' in decoded && decoded.error).toBeInstanceOf(SerializationError);
      expect((decoded as { error: Error }).error.message).toContain(`"${algorithm}"`);

      const key = `k-${algorithm}`;
      await server.client().set(valueKey(prefix, key), forged);
      const before = corrupt.length;
      expect(await cache.getOrCompute(key, () => records(20), 60_000)).toEqual(records(20));
      expect(corrupt.length).toBe(before + 1);
      expect(corrupt[before]!.error).toBeInstanceOf(SerializationError);
      expect(corrupt[before]!.error.message).toContain(`"${algorithm}"`);
      // Replaced by the load: readable by every process now.
      await expectRead(prefix, key, records(20));
    }
    await cache.close();
  });
});

describe('the L1 of a compressing cache', () => {
  it('keeps the decoded value, and counts an entry by its bytes before compression', async () => {
    const prefix = freshId('l1');
    const value = records(400);
    const plain = plainSize(value);
    const writer = createCache({ redis: server.client(), prefix, compression: { threshold: 0, algorithm: 'gzip' } });
    await writer.set('big', value, 60_000);
    const stored = (await raw(prefix, 'big')).length;
    // Well under the bound as stored, well over it as decoded.
    const maxSize = Math.floor(plain / 2);
    expect(stored * 4).toBeLessThan(maxSize);

    const codec = new EntryCodec(portableSerializer, { threshold: 0, algorithm: 'gzip' });
    const decoded = codec.decode(await raw(prefix, 'big'));
    if ('error' in decoded) throw decoded.error;
    expect(storedSize(decoded)).toBeGreaterThan(plain);
    expect(storedSize(decoded)).toBeLessThan(plain + 100);

    const bounded = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000, maxSize } });
    const roomy = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000, maxSize: plain * 4 } });
    for (let round = 0; round < 100 && roomy.peek('big') === undefined; round++) {
      await roomy.get('big');
      await bounded.get('big');
      await sleep(5);
    }
    expect(roomy.peek('big')).toEqual(value);
    await bounded.get('big');
    expect(bounded.peek('big')).toBeUndefined();
    await Promise.all([writer.close(), bounded.close(), roomy.close()]);
  });
});

describe('across processes with different settings', () => {
  afterAll(() => killAllChildren());
  const worker = path.join(root, 'test/fixtures/compression-worker.ts');

  async function start(prefix: string, compression: unknown, command?: string): Promise<JsonChild> {
    const child = new JsonChild(`compression ${JSON.stringify(compression)}`, ['--import', 'tsx', worker, '--config', JSON.stringify({ url: server.url, prefix, compression })], command ? { command } : {});
    await child.take('ready', 60_000);
    return child;
  }

  async function load(child: JsonChild, key: string, count: number) {
    child.send({ cmd: 'load', key, count });
    return child.take('done', 30_000);
  }

  const runs = async (prefix: string, key: string) => Number((await server.client().get(`${prefix}:runs:${key}`)) ?? 0);

  it('brotli, gzip and none read each other: each key is loaded once, whoever wrote it', async () => {
    const prefix = freshId('fleet');
    const fleet = await Promise.all([start(prefix, { algorithm: 'brotli', threshold: 512 }), start(prefix, { algorithm: 'gzip' }), start(prefix, false)]);
    try {
      for (const [i, writer] of fleet.entries()) {
        const key = `k${i}`;
        const first = await load(writer, key, 150);
        expect(first).toMatchObject({ same: true, corrupt: [] });
        expect(decodeEntry(await raw(prefix, key)).compression).toBe([ 'brotli', 'gzip', undefined ][i]);
        const rest = await Promise.all(fleet.filter((c) => c !== writer).map((c) => load(c, key, 150)));
        for (const done of rest) expect(done).toMatchObject({ same: true, corrupt: [] });
        expect(await runs(prefix, key)).toBe(1);
      }
    } finally {
      await Promise.all(fleet.map((c) => c.exit()));
    }
  });

  describe('one runtime with zstd, one without', () => {
    const here = Number(process.versions.node.split('.')[0]);
    /** Node 26 (it has zstd) beside this one, or Node 20 (it has not) when this one has zstd. */
    const otherMajor = hasAlgorithm('zstd') ? 20 : 26;
    let otherNode = '';
    beforeAll(() => {
      otherNode = execFileSync('npx', ['-y', '-p', `node@${otherMajor}`, '-c', 'command -v node'], { cwd: root, encoding: 'utf8' }).trim();
    }, 300_000);

    it('the one without zstd meets a zstd entry as a corrupt entry (a SerializationError naming zstd), loads and stores one both read', async () => {
      expect(here === otherMajor).toBe(false);
      const prefix = freshId('zstd');
      // This Node and the other: the one with zstd runs a process writing zstd and one writing gzip; the other, `compression: true`.
      const zstdCommand = hasAlgorithm('zstd') ? undefined : otherNode;
      const plainCommand = hasAlgorithm('zstd') ? otherNode : undefined;
      const [zstdWriter, gzipWriter, without] = await Promise.all([start(prefix, { algorithm: 'zstd' }, zstdCommand), start(prefix, { algorithm: 'gzip' }, zstdCommand), start(prefix, true, plainCommand)]);
      try {
        expect(await load(zstdWriter, 'k', 150)).toMatchObject({ same: true, corrupt: [] });
        expect(decodeEntry(await raw(prefix, 'k')).compression).toBe('zstd');
        // A process of the runtime with zstd reads it whatever its own setting.
        expect(await load(gzipWriter, 'k', 150)).toMatchObject({ same: true, corrupt: [] });
        expect(await runs(prefix, 'k')).toBe(1);
        const met = await load(without, 'k', 150);
        expect(met.same).toBe(true);
        expect(met.corrupt).toHaveLength(1);
        expect(met.corrupt[0]).toMatchObject({ name: 'SerializationError', code: 'E_SERIALIZATION' });
        expect(met.corrupt[0].message).toContain('"zstd"');
        expect(await runs(prefix, 'k')).toBe(2);
        // Its load replaced the entry with one (brotli) that every process reads.
        expect(decodeEntry(await raw(prefix, 'k')).compression).toBe('brotli');
        for (const child of [zstdWriter, gzipWriter, without]) expect(await load(child, 'k', 150)).toMatchObject({ same: true, corrupt: [] });
        expect(await runs(prefix, 'k')).toBe(2);
      } finally {
        await Promise.all([zstdWriter.exit(), gzipWriter.exit(), without.exit()]);
      }
    });
  });
});

// Keeps the zlib import honest for readers: the runtime's own zstd is what `hasAlgorithm` reports.
it('hasAlgorithm("zstd") is whether this Node has zlib.zstdCompressSync', () => {
  expect(hasAlgorithm('zstd')).toBe(typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function');
});
