/**
 * The serializers side by side, for the choice of the default: the portable format of
 * `portableSerializer` (the default), Node's `v8.serialize` (the previous default), msgpack
 * with msgpackr's structured-clone extensions (`dogpile-guard/msgpack`), a typed JSON encoding
 * (JSON with a replacer and reviver that tag Date, Map, Set, bigint, bytes and undefined) and
 * plain JSON (for reference: it keeps none of those types). Encode and decode speed and size,
 * for a small value (a record with a date, a map, a bigint), a large one (1,000 records) and
 * a binary one (64 KiB of bytes in an object). Slices of every candidate interleaved, in an
 * order rotated every round. No Redis: the serializers alone.
 *
 *   npm run bench -- serializers        (writes bench/.out/serializers.md)
 */
import { deserialize as v8Deserialize, serialize as v8Serialize } from 'node:v8';
import { isDeepStrictEqual } from 'node:util';
import { Packr } from 'msgpackr';
import { portableSerializer } from '../src/store/serializer.js';
import { median, summary } from './lib/stats.js';
import type { BenchContext } from './lib/types.js';

interface Candidate {
  id: string;
  name: string;
  encode: (value: unknown) => Uint8Array;
  decode: (bytes: Buffer) => unknown;
}

const packr = new Packr({ structuredClone: true, useBigIntExtension: true });

/** JSON whose replacer tags the types JSON has not (`{ $t, v }`), and whose reviver restores them. */
function typedReplacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  if (raw instanceof Date) return { $t: 'D', v: raw.getTime() };
  if (raw instanceof Map) return { $t: 'M', v: [...raw] };
  if (raw instanceof Set) return { $t: 'S', v: [...raw] };
  if (typeof raw === 'bigint') return { $t: 'B', v: raw.toString() };
  if (raw === undefined) return { $t: 'U' };
  if (Buffer.isBuffer(raw)) return { $t: 'X', v: raw.toString('base64') };
  if (raw instanceof Uint8Array) return { $t: 'u8', v: Buffer.from(raw).toString('base64') };
  return value;
}

function typedReviver(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || !('$t' in value)) return value;
  const { $t, v } = value as { $t: string; v: unknown };
  switch ($t) {
    case 'D':
      return new Date(v as number);
    case 'M':
      return new Map(v as [unknown, unknown][]);
    case 'S':
      return new Set(v as unknown[]);
    case 'B':
      return BigInt(v as string);
    case 'U':
      return undefined;
    case 'X':
      return Buffer.from(v as string, 'base64');
    case 'u8':
      return new Uint8Array(Buffer.from(v as string, 'base64'));
    default:
      return value;
  }
}

const CANDIDATES: Candidate[] = [
  { id: 'portable', name: '`portableSerializer` (the default)', encode: portableSerializer.serialize, decode: portableSerializer.deserialize },
  { id: 'v8', name: '`v8Serializer` (`node:v8`)', encode: (v) => v8Serialize(v), decode: (b) => v8Deserialize(b) as unknown },
  { id: 'msgpack', name: 'msgpackr, structured clone (`dogpile-guard/msgpack`)', encode: (v) => packr.pack(v), decode: (b) => packr.unpack(b) as unknown },
  {
    id: 'typed-json',
    name: 'typed JSON (replacer + reviver)',
    encode: (v) => Buffer.from(JSON.stringify({ v }, typedReplacer), 'utf8'),
    decode: (b) => (JSON.parse(b.toString('utf8'), typedReviver) as { v: unknown }).v,
  },
  { id: 'json', name: 'plain JSON (loses Date, Map, Set, bigint, bytes)', encode: (v) => Buffer.from(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)), 'utf8'), decode: (b) => JSON.parse(b.toString('utf8')) as unknown },
];

function record(i: number) {
  return {
    id: i,
    name: `product ${i}`,
    price: 19.99 + i,
    inStock: i % 3 !== 0,
    tags: ['a', 'b', `t${i % 10}`],
    created: new Date(1_700_000_000_000 + i * 1000),
    attributes: new Map<string, string | number>([['colour', 'blue'], ['size', i % 5]]),
    views: 12345678901234567890n + BigInt(i),
    note: i % 2 === 0 ? undefined : 'fragile',
  };
}

const VALUES: { id: string; name: string; value: unknown }[] = [
  { id: 'small', name: 'small: one record', value: record(1) },
  { id: 'large', name: 'large: 1,000 records', value: Array.from({ length: 1000 }, (_, i) => record(i)) },
  { id: 'binary', name: 'binary: 64 KiB Buffer in an object', value: { name: 'thumbnail.png', bytes: Buffer.alloc(65_536, 7), created: new Date(1_700_000_000_000) } },
];

/** Operations per second of `op` over a slice of `ms`. */
function rate(op: () => void, ms: number): number {
  let ops = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    for (let i = 0; i < 20; i++) op();
    ops += 20;
    t = performance.now();
  }
  return (ops / (t - t0)) * 1000;
}

export default async function run(ctx: BenchContext): Promise<string> {
  const rounds = ctx.quick ? 2 : 5;
  const sliceMs = ctx.quick ? 40 : 120;
  const results = new Map<string, { encode: number[]; decode: number[]; size: number; keeps: boolean }>();
  for (const { id: v, value } of VALUES) {
    for (const c of CANDIDATES) {
      const bytes = Buffer.from(c.encode(value));
      results.set(`${v}:${c.id}`, { encode: [], decode: [], size: bytes.length, keeps: isDeepStrictEqual(c.decode(bytes), value) });
      // warm-up
      rate(() => c.decode(Buffer.from(c.encode(value))), 50);
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (const { id: v, value } of VALUES) {
      for (let i = 0; i < CANDIDATES.length; i++) {
        const c = CANDIDATES[(i + r) % CANDIDATES.length]!;
        const slot = results.get(`${v}:${c.id}`)!;
        const bytes = Buffer.from(c.encode(value));
        slot.encode.push(rate(() => c.encode(value), sliceMs));
        slot.decode.push(rate(() => c.decode(bytes), sliceMs));
      }
    }
    ctx.log(`round ${r + 1}/${rounds}`);
  }
  await Promise.resolve();

  /** Microseconds per operation, from operations per second. */
  const us = (values: number[]) => {
    const per = values.map((x) => 1e6 / x);
    return summary(per, median(per) >= 100 ? 0 : median(per) >= 10 ? 1 : 2);
  };
  const out: string[] = [];
  out.push('## Serializers side by side (`bench/serializers.bench.ts`)');
  out.push('');
  out.push(
    `Microseconds per encode and per decode (median [min–max] over ${rounds} interleaved slices of ${sliceMs} ms each, one process), the size in bytes, ` +
      'the speed against `portableSerializer` in the same run (above 1×: faster), and whether the value came back deep-equal (types included: Date, Map, bigint, Buffer, ' +
      'and `undefined` properties, which a JSON reviver cannot restore).',
  );
  for (const { id: v, name } of VALUES) {
    out.push('');
    out.push(`**${name}**`);
    out.push('');
    out.push('| serializer | encode (µs) | decode (µs) | bytes | round-trips |');
    out.push('|---|---|---|---|---|');
    const base = results.get(`${v}:portable`)!;
    for (const c of CANDIDATES) {
      const s = results.get(`${v}:${c.id}`)!;
      const vs = (a: number[], b: number[]) => (c.id === 'portable' ? '' : ` (${(median(a) / median(b)).toFixed(2)}×)`);
      out.push(`| ${c.name} | ${us(s.encode)}${vs(s.encode, base.encode)} | ${us(s.decode)}${vs(s.decode, base.decode)} | ${s.size} | ${s.keeps ? 'yes' : 'no'} |`);
    }
  }
  return out.join('\n');
}
