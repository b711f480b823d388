/**
 * Bulk calls on Redis hits (no L1): `getMany` and `getOrComputeMany` of 100 keys against 100 parallel `get` calls,
 * 100 parallel `getOrCompute` hits, and a bare ioredis pipeline of the same 100 GETs decoded
 * with the entry decode (header and default serializer: what any client must do at least); then `setMany` of 100 entries
 * against 100 parallel `set` calls. The contenders run in interleaved slices, in an order
 * rotated every round, so a drift of the shared machine does not favour one of them.
 *
 *   npm run bench -- bulk        (writes bench/.out/bulk.md)
 */
import { createCache } from '../src/index.js';
import { EntryCodec } from '../src/store/codec.js';
import { defaultSerializer } from '../src/store/serializer.js';

/** The entry decode the library itself does (header, then the default serializer). */
const codec = new EntryCodec(defaultSerializer);
import { startRedis } from '../tools/redis-server.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

const KEYS = 100;

export default async function run(ctx: BenchContext): Promise<string> {
  const redis = await startRedis();
  const client = redis.client();
  const prefix = 'bulk';
  const cache = createCache({ redis: client, prefix });
  const keys = Array.from({ length: KEYS }, (_, i) => `item:${i}`);
  const value = { id: 42, name: 'product', price: 9.99, tags: ['a', 'b', 'c'] };
  const rawKeys = keys.map((key) => `${prefix}:v:{${key}}`);
  const load = () => value;

  const reads: { id: string; name: string; batch: () => Promise<unknown> }[] = [
    { id: 'getMany', name: '`getMany(100 keys)`', batch: () => cache.getMany(keys) },
    { id: 'get', name: '100 parallel `get`', batch: () => Promise.all(keys.map((key) => cache.get(key))) },
    { id: 'getOrCompute', name: '100 parallel `getOrCompute` (hits)', batch: () => Promise.all(keys.map((key) => cache.getOrCompute(key, load, 600_000))) },
    { id: 'getOrComputeMany', name: '`getOrComputeMany(100 keys)` (hits)', batch: () => cache.getOrComputeMany(keys, (missing) => missing.map(load), 600_000) },
    {
      id: 'bare',
      name: 'bare ioredis pipeline of 100 `GET` + the entry decode',
      batch: async () => {
        const pipeline = client.pipeline();
        for (const key of rawKeys) pipeline.getBuffer(key);
        const replies = (await pipeline.exec())!;
        return replies.map(([, bytes]) => codec.decode(bytes as Buffer));
      },
    },
    {
      id: 'bare-mget',
      name: 'bare ioredis `MGET` of 100 keys + the entry decode',
      batch: async () => (await client.mgetBuffer(...rawKeys)).map((bytes) => codec.decode(bytes!)),
    },
  ];
  const entries = keys.map((key) => ({ key, value }));
  const writes: { id: string; name: string; batch: () => Promise<unknown> }[] = [
    { id: 'setMany', name: '`setMany(100 entries)`', batch: () => cache.setMany(entries, { ttl: 600_000 }) },
    { id: 'set', name: '100 parallel `set`', batch: () => Promise.all(keys.map((key) => cache.set(key, value, 600_000))) },
  ];

  const rounds = ctx.quick ? 3 : 10;
  const sliceMs = ctx.quick ? 100 : 250;
  const results = new Map<string, number[]>();
  const measure = async (group: typeof reads) => {
    for (const { batch } of group) for (let i = 0; i < 200; i++) await batch();
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < group.length; i++) {
        const { id, batch } = group[(i + r) % group.length]!;
        let n = 0;
        const t0 = performance.now();
        while (performance.now() - t0 < sliceMs) {
          await batch();
          n++;
        }
        const ms = performance.now() - t0;
        results.set(id, [...(results.get(id) ?? []), ((n * KEYS) / ms) * 1000]);
      }
    }
  };
  try {
    await cache.setMany(entries, { ttl: 600_000 });
    await measure(reads);
    ctx.log('reads: done');
    await measure(writes);
    ctx.log('writes: done');
  } finally {
    await cache.close();
    client.disconnect();
    await redis.stop();
  }

  const kkeys = (values: number[]) => summary(values.map((v) => v / 1000), 0);
  const table = (group: typeof reads, ...bases: string[]) => {
    const rows = [`| contender | thousand keys/s | ${bases.map((base) => `against ${group.find((g) => g.id === base)!.name}`).join(' | ')} |`, `|---|---|${bases.map(() => '---|').join('')}`];
    const ratio = (id: string, base: string) => `${(median(results.get(id) ?? []) / median(results.get(base) ?? [])).toFixed(2)}×`;
    for (const { id, name } of group) rows.push(`| ${name} | ${kkeys(results.get(id) ?? [])} | ${bases.map((base) => ratio(id, base)).join(' | ')} |`);
    return rows;
  };
  const out: string[] = [];
  out.push('## Bulk calls (`bench/bulk.bench.ts`)');
  out.push('');
  out.push(
    `Batches of ${KEYS} keys, one batch at a time, on one connection (no L1): thousands of keys per second, median [min–max] over ${rounds} interleaved slices of ${sliceMs} ms. ` +
      'Reads are hits of a small object stored with the v8 serializer; the bare reads decode the same bytes with the entry decode and check nothing else (no freshness, tags or generations). `getMany` sends one `MGET`; the bare `MGET` is its limit.',
  );
  out.push('');
  out.push(...table(reads, 'bare', 'bare-mget'));
  out.push('');
  out.push(...table(writes, 'set'));
  return out.join('\n');
}
