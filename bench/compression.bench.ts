/**
 * Compression of stored values (`compression: { algorithm }`) against none, for JSON-ish values
 * of about 1 KB, 16 KB and 256 KB (as the default serializer writes them): the bytes an entry
 * takes in Redis, the CPU cost of encoding and decoding an entry (the store's `EntryCodec`, no
 * Redis), and a `set` and a `get` (no L1) through a cache on a real Redis. Then the serializers
 * (portable, v8, msgpack, JSON) on the same values: encode, decode, size. Every measure is a
 * fixed count of operations (fewer with BENCH_QUICK=1); the whole run takes well under a minute.
 *
 *   npm run bench -- compression        (writes bench/.out/compression.md)
 */
import { deserialize as v8Deserialize, serialize as v8Serialize } from 'node:v8';
import { Packr } from 'msgpackr';
import { createCache } from '../src/index.js';
import { EntryCodec } from '../src/store/codec.js';
import { EntryKind } from '../src/store/entry.js';
import { valueKey } from '../src/store/key.js';
import { hasAlgorithm, type CompressionAlgorithm } from '../src/store/compression.js';
import { portableSerializer } from '../src/store/serializer.js';
import type { StoredEntry } from '../src/store/types.js';
import { startRedis } from '../tools/redis-server.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

/** JSON-ish records: ids, names, e-mails, tags, amounts, flags (about 120 bytes each as stored). */
function records(count: number) {
  return Array.from({ length: count }, (_, i) => ({
    id: 100_000 + i,
    name: `customer ${i}`,
    email: `customer${i}@example.com`,
    country: ['FR', 'DE', 'NL', 'IT'][i % 4],
    tags: ['newsletter', i % 2 === 0 ? 'even' : 'odd'],
    balance: Math.round(i * 1037.13) / 100,
    active: i % 3 !== 0,
  }));
}

/** The record count whose portable bytes come nearest `bytes` from above. */
function sized(bytes: number) {
  let count = 1;
  while (portableSerializer.serialize(records(count)).length < bytes) count++;
  return records(count);
}

const VALUES = [
  { id: '1k', name: '~1 KB', value: sized(1024) },
  { id: '16k', name: '~16 KB', value: sized(16 * 1024) },
  { id: '256k', name: '~256 KB', value: sized(256 * 1024) },
];

type Config = { id: string; name: string; algorithm: CompressionAlgorithm | undefined };
const CONFIGS: Config[] = [
  { id: 'none', name: 'none', algorithm: undefined },
  ...(['zstd', 'brotli', 'gzip'] as const).filter(hasAlgorithm).map((algorithm) => ({ id: algorithm, name: algorithm, algorithm })),
];

/** Microseconds per call of `op`, over `count` calls. */
function perCall(op: () => unknown, count: number): number {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) op();
  return ((performance.now() - t0) * 1000) / count;
}

/** Microseconds of each of `count` awaited calls of `op`, in order. */
async function latencies(op: (i: number) => Promise<unknown>, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await op(i);
    out.push((performance.now() - t0) * 1000);
  }
  return out;
}

const us = (values: number[]) => summary(values, median(values) >= 100 ? 0 : 1);

export default async function run(ctx: BenchContext): Promise<string> {
  const rounds = ctx.quick ? 2 : 5;
  /** Calls per slice and per round trip measure, by value: fewer for the larger values. */
  const calls = (id: string) => (id === '256k' ? (ctx.quick ? 5 : 20) : id === '16k' ? (ctx.quick ? 40 : 150) : ctx.quick ? 200 : 1000);
  const codecs = new Map(CONFIGS.map((c) => [c.id, new EntryCodec(portableSerializer, c.algorithm === undefined ? undefined : { threshold: 1024, algorithm: c.algorithm })]));
  const reader = new EntryCodec(portableSerializer);

  // The codec alone: entry bytes, encode and decode cost (slices interleaved, order rotated per round).
  const codecResults = new Map<string, { bytes: number; encode: number[]; decode: number[] }>();
  for (const { id: v, value } of VALUES) {
    for (const c of CONFIGS) {
      const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: Date.now(), ttl: 60_000 };
      codecResults.set(`${v}:${c.id}`, { bytes: codecs.get(c.id)!.encode('k', entry).length, encode: [], decode: [] });
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (const { id: v, value } of VALUES) {
      for (let i = 0; i < CONFIGS.length; i++) {
        const c = CONFIGS[(i + r) % CONFIGS.length]!;
        const codec = codecs.get(c.id)!;
        const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: Date.now(), ttl: 60_000 };
        const bytes = codec.encode('k', entry);
        const slot = codecResults.get(`${v}:${c.id}`)!;
        slot.encode.push(perCall(() => codec.encode('k', entry), calls(v)));
        slot.decode.push(perCall(() => reader.decode(bytes), calls(v)));
      }
    }
    ctx.log(`codec round ${r + 1}/${rounds}`);
  }

  // Through a cache on a real Redis: set, then get (no L1), one call at a time.
  const redis = await startRedis();
  const trips = new Map<string, { set: number[]; get: number[]; stored: number }>();
  try {
    const client = redis.client();
    for (const c of CONFIGS) {
      const cache = createCache({ redis: client, prefix: `bench-${c.id}`, ...(c.algorithm === undefined ? {} : { compression: { threshold: 1024, algorithm: c.algorithm } }) });
      for (const { id: v, value } of VALUES) {
        const n = calls(v);
        await latencies((i) => cache.set(`warm${i % 4}`, value, 60_000), Math.min(n, 20));
        const set = await latencies((i) => cache.set(`${v}:${i}`, value, 60_000), n);
        const get = await latencies((i) => cache.get(`${v}:${i}`), n);
        const stored = Number(await client.strlen(valueKey(`bench-${c.id}`, `${v}:0`)));
        trips.set(`${v}:${c.id}`, { set, get, stored });
      }
      await cache.close();
      ctx.log(`round trips: ${c.name}`);
    }
  } finally {
    await redis.stop();
  }

  // The serializers on the same values.
  const packr = new Packr({ structuredClone: true, useBigIntExtension: true });
  const SERIALIZERS = [
    { id: 'portable', name: '`portableSerializer` (default)', encode: portableSerializer.serialize, decode: portableSerializer.deserialize },
    { id: 'v8', name: '`v8Serializer`', encode: (x: unknown) => v8Serialize(x), decode: (b: Buffer) => v8Deserialize(b) as unknown },
    { id: 'msgpack', name: 'msgpackr (`dogpile-guard/msgpack`)', encode: (x: unknown) => packr.pack(x), decode: (b: Buffer) => packr.unpack(b) as unknown },
    { id: 'json', name: '`jsonSerializer`', encode: (x: unknown) => Buffer.from(JSON.stringify(x), 'utf8'), decode: (b: Buffer) => JSON.parse(b.toString('utf8')) as unknown },
  ];
  const serial = new Map<string, { bytes: number; encode: number[]; decode: number[] }>();
  for (let r = 0; r < rounds; r++) {
    for (const { id: v, value } of VALUES) {
      for (let i = 0; i < SERIALIZERS.length; i++) {
        const s = SERIALIZERS[(i + r) % SERIALIZERS.length]!;
        const bytes = Buffer.from(s.encode(value));
        const slot = serial.get(`${v}:${s.id}`) ?? { bytes: bytes.length, encode: [], decode: [] };
        serial.set(`${v}:${s.id}`, slot);
        slot.encode.push(perCall(() => s.encode(value), calls(v)));
        slot.decode.push(perCall(() => s.decode(bytes), calls(v)));
      }
    }
  }
  ctx.log('serializers done');

  const out: string[] = [];
  out.push('## Compression of stored values (`bench/compression.bench.ts`)');
  out.push('');
  out.push(
    `JSON-ish records (ids, names, e-mails, tags, amounts) written by the default serializer; \`compression: { threshold: 1024, algorithm }\` against none. ` +
      `Entry bytes as stored in Redis; encode and decode: µs per call of the store's \`EntryCodec\` (no Redis; median [min–max] over ${rounds} interleaved slices); ` +
      'set and get: µs per call through a cache on a loopback Redis, one at a time, no L1 (median [min–max] over the calls).',
  );
  for (const { id: v, name, value } of VALUES) {
    out.push('');
    out.push(`**${name}** (${portableSerializer.serialize(value).length} bytes serialised)`);
    out.push('');
    out.push('| compression | entry bytes | of none | encode (µs) | decode (µs) | set (µs) | get (µs) |');
    out.push('|---|---|---|---|---|---|---|');
    const base = codecResults.get(`${v}:none`)!;
    for (const c of CONFIGS) {
      const s = codecResults.get(`${v}:${c.id}`)!;
      const t = trips.get(`${v}:${c.id}`)!;
      out.push(`| ${c.name} | ${t.stored} | ${((100 * s.bytes) / base.bytes).toFixed(0)}% | ${us(s.encode)} | ${us(s.decode)} | ${us(t.set)} | ${us(t.get)} |`);
    }
  }
  out.push('');
  out.push('**The serializers on the same values** (µs per encode / decode, median [min–max] over the slices; bytes)');
  out.push('');
  out.push(`| serializer | ${VALUES.map((v) => `${v.name} encode / decode / bytes`).join(' | ')} |`);
  out.push(`|---|${VALUES.map(() => '---').join('|')}|`);
  for (const s of SERIALIZERS) {
    const cells = VALUES.map(({ id: v }) => {
      const r = serial.get(`${v}:${s.id}`)!;
      return `${us(r.encode)} / ${us(r.decode)} / ${r.bytes}`;
    });
    out.push(`| ${s.name} | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}
