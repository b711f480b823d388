/**
 * The serializers: what the portable default keeps (every kind of value users store, checked
 * one by one and on random values with fast-check), what it refuses (a `SerializationError`
 * naming the key, nothing written), bytes it did not write (an error, never a wrong value),
 * `dogpile-guard/msgpack`, and two caches whose serializers cannot read each other on one Redis.
 */
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, jsonSerializer, portableSerializer, SerializationError, UnknownSerializerError, v8Serializer, type Serializer } from '../src/index.js';
import { msgpackSerializer } from '../src/msgpack/index.js';
import { decodeEntry } from '../src/store/entry.js';
import { valueKey } from '../src/store/key.js';
import { useRedis } from './support/use-redis.js';
import { portableValue } from './fixtures/formats/samples.js';

function record(cache: ReturnType<typeof createCache>, event: 'coalesced' | 'hit'): unknown[] {
  const seen: unknown[] = [];
  cache.on(event as 'hit', (e) => seen.push(e));
  return seen;
}

/** Polls `check` until it holds; fails after 10 s (generous: what it waits for is one pub/sub delivery). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; !check(); i++) {
    if (i > 2000) throw new Error('the condition did not hold within 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const roundTrip = (s: Serializer, value: unknown) => s.deserialize(Buffer.from(s.serialize(value)));

describe('portableSerializer', () => {
  it('keeps every kind of value of the sample, with its type', () => {
    const value = portableValue();
    const back = roundTrip(portableSerializer, value) as ReturnType<typeof portableValue>;
    expect(back).toEqual(value);
    expect(isDeepStrictEqual(back, value)).toBe(true);
    expect(Object.is(back.negativeZero, -0)).toBe(true);
    expect(Buffer.isBuffer(back.bytes)).toBe(true);
    expect(back.ints).toBeInstanceOf(Int32Array);
    expect(back.first).toBe(back.second);
  });

  it('keeps cycles, holes, ArrayBuffer, DataView, Error, null-prototype objects and a "__proto__" key', () => {
    const cyclic: Record<string, unknown> = { name: 'root' };
    cyclic.self = cyclic;
    const back = roundTrip(portableSerializer, cyclic) as Record<string, unknown>;
    expect(back.self).toBe(back);

    // eslint-disable-next-line no-sparse-arrays
    expect(roundTrip(portableSerializer, [1, , 3])).toEqual([1, undefined, 3]);
    const ab = roundTrip(portableSerializer, new Uint8Array([1, 2, 3]).buffer);
    expect(ab).toBeInstanceOf(ArrayBuffer);
    expect([...new Uint8Array(ab as ArrayBuffer)]).toEqual([1, 2, 3]);
    const view = roundTrip(portableSerializer, new DataView(new Uint8Array([9, 8]).buffer)) as DataView;
    expect(view).toBeInstanceOf(DataView);
    expect(view.getUint8(1)).toBe(8);
    const error = roundTrip(portableSerializer, new RangeError('out')) as Error;
    expect(error).toBeInstanceOf(Error);
    expect([error.name, error.message]).toEqual(['RangeError', 'out']);
    const bare = Object.assign(Object.create(null) as object, { a: 1 });
    expect(roundTrip(portableSerializer, bare)).toEqual({ a: 1 });
    const proto = JSON.parse('{"__proto__": {"polluted": true}}') as object;
    const read = roundTrip(portableSerializer, proto) as Record<string, unknown>;
    expect(Object.keys(read)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(read)).toBe(Object.prototype);
  });

  it('writes class instances as their own enumerable properties, as v8Serializer did', () => {
    class Point {
      constructor(
        public x: number,
        public y: number,
      ) {}
      get sum() {
        return this.x + this.y;
      }
    }
    expect(roundTrip(portableSerializer, new Point(1, 2))).toEqual(roundTrip(v8Serializer, new Point(1, 2)));
  });

  it('round-trips random values (fast-check), numbers and strings exactly', () => {
    const anything = fc.anything({
      withBigInt: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withTypedArray: true,
      withSparseArray: false,
      withNullPrototype: false, // read back with Object.prototype (as v8Serializer does): checked above
      withBoxedValues: false,
      withObjectString: true,
    });
    fc.assert(
      fc.property(anything, (value) => isDeepStrictEqual(roundTrip(portableSerializer, value), value)),
      { numRuns: 300 },
    );
    fc.assert(fc.property(fc.oneof(fc.double(), fc.integer(), fc.maxSafeInteger()), (n) => Object.is(roundTrip(portableSerializer, n), n)));
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => roundTrip(portableSerializer, s) === s));
  });

  it('refuses functions, symbols and promises with a SerializationError naming the key; nothing is written', async () => {
    const cache = createCache();
    for (const [key, value] of [
      ['fn', { f: () => 1 }],
      ['symbol', { s: Symbol('x') }],
      ['promise', { p: Promise.resolve(1) }],
    ] as const) {
      const error = await cache.set(key, value, 1000).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SerializationError);
      expect((error as SerializationError).key).toBe(key);
      expect(await cache.get(key)).toBeUndefined();
    }
    await cache.close();
  });

  it('throws on bytes it did not write, truncated or trailing (a corrupt entry, never a wrong value)', () => {
    const good = Buffer.from(portableSerializer.serialize({ a: [1, 'two'] }));
    expect(() => portableSerializer.deserialize(Buffer.from(v8Serializer.serialize({ a: 1 })))).toThrow();
    expect(() => portableSerializer.deserialize(good.subarray(0, good.length - 1))).toThrow();
    expect(() => portableSerializer.deserialize(Buffer.concat([good, Buffer.from([0])]))).toThrow();
    expect(() => portableSerializer.deserialize(Buffer.from([1, 0x7f]))).toThrow(/unknown tag/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          portableSerializer.deserialize(Buffer.concat([Buffer.from([1]), bytes]));
        } catch (error) {
          return error instanceof Error;
        }
        return true;
      }),
    );
  });
});

describe('serializer option', () => {
  it('rejects a name that cannot be written into an entry, naming the option', () => {
    for (const name of ['', 'x'.repeat(65), 'with space', 'é']) {
      expect(() => createCache({ serializer: { name, serialize: portableSerializer.serialize, deserialize: portableSerializer.deserialize } })).toThrow(InvalidOptionError);
    }
    const error = (() => {
      try {
        createCache({ serializer: { name: 'a b', serialize: () => new Uint8Array(), deserialize: () => 1 } });
      } catch (e) {
        return e as InvalidOptionError;
      }
    })();
    expect(error?.option).toBe('serializer');
  });

  it('names: v8 under Node, json, msgpack', () => {
    expect([v8Serializer.name, jsonSerializer.name, msgpackSerializer.name, portableSerializer.name]).toEqual(['v8', 'json', 'msgpack', 'portable']);
  });
});

describe('dogpile-guard/msgpack', () => {
  it('round-trips Dates, Maps, Sets, typed arrays, Buffers and bigints', () => {
    const value = {
      date: new Date(1_700_000_000_000),
      map: new Map<unknown, unknown>([['a', 1], [2, [3]]]),
      set: new Set(['x', 'y']),
      floats: new Float64Array([1.5, -2]),
      ints: new Int16Array([-3, 4]),
      bytes: Buffer.from([0, 255]),
      big: 12345678901234567890n,
      nested: { missing: undefined, nothing: null },
    };
    const back = roundTrip(msgpackSerializer, value) as typeof value;
    expect(back).toEqual(value);
    expect(back.date).toBeInstanceOf(Date);
    expect(back.map).toBeInstanceOf(Map);
    expect(back.set).toBeInstanceOf(Set);
    expect(back.floats).toBeInstanceOf(Float64Array);
    expect(back.ints).toBeInstanceOf(Int16Array);
    expect(typeof back.big).toBe('bigint');
  });
});

describe('two caches whose serializers cannot read each other, on one Redis', () => {
  const server = useRedis();
  const named = (name: string): Serializer => ({ name, serialize: portableSerializer.serialize, deserialize: portableSerializer.deserialize });

  it('default settings store with portableSerializer, named in the entry', async () => {
    const cache = createCache({ redis: server.client() });
    try {
      expect(await cache.getOrCompute('default', () => new Map([[1, new Date(5)]]), 60_000)).toEqual(new Map([[1, new Date(5)]]));
      const entry = decodeEntry((await server.client().getBuffer(valueKey('dogpile', 'default')))!);
      expect(entry.serializer).toBe('portable');
      expect(portableSerializer.deserialize(entry.payload)).toEqual(new Map([[1, new Date(5)]]));
    } finally {
      await cache.close();
    }
  });

  it('a value shared (not stored) by a leader of another serializer sends the waiter to its own load, with no corrupt report', async () => {
    const left = createCache({ redis: server.client(), serializer: named('left'), inlineMax: 8 });
    const right = createCache({ redis: server.client(), serializer: named('right') });
    const reports: Error[] = [];
    right.on('corrupt', ({ error }) => reports.push(error));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const leading = new Promise<void>((resolve) => (started = resolve));
    try {
      const leader = left.getOrCompute('shared-big', async () => {
        started();
        await gate;
        return 'x'.repeat(100);
      }, { ttl: 60_000, cacheable: () => 'share' });
      await leading;
      const coalesced = record(right, 'coalesced');
      const waiter = right.getOrCompute('shared-big', () => 'right own', 60_000);
      await until(() => coalesced.length > 0);
      release();
      expect(await leader).toBe('x'.repeat(100));
      expect(await waiter).toBe('right own');
      expect(reports).toEqual([]);
    } finally {
      await Promise.all([left.close(), right.close()]);
    }
  });

  it('a write by another serializer drops the copy a process keeps in L1', async () => {
    const left = createCache({ redis: server.client(), serializer: named('left') });
    const right = createCache({ redis: server.client(), serializer: named('right'), l1: { ttl: 60_000 } });
    const hits = record(right, 'hit');
    try {
      await right.set('l1-copy', 'right value', 60_000);
      // Read until the copy is served from L1 (once the key's channel is followed).
      for (let i = 0; i < 100 && !hits.some((h) => (h as { layer: string }).layer === 'l1'); i++) {
        expect(await right.getOrCompute('l1-copy', () => 'never', 60_000)).toBe('right value');
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(hits).toContainEqual({ key: 'l1-copy', layer: 'l1' });
      await left.set('l1-copy', 'left value', 60_000);
      // The announcement of the write reaches the right process: its copy goes.
      await until(() => right.peek('l1-copy') === undefined);
      expect(await right.getOrCompute('l1-copy', () => 'right loads', 60_000)).toBe('right loads');
    } finally {
      await Promise.all([left.close(), right.close()]);
    }
  });

  it('the reader reports the entry once (UnknownSerializerError), answers with its own load, and never replaces it while fresh', async () => {
    const writer = createCache({ redis: server.client(), serializer: named('left') });
    const reader = createCache({ redis: server.client(), serializer: named('right') });
    const reports: Error[] = [];
    reader.on('corrupt', ({ error }) => reports.push(error));
    try {
      expect(await writer.getOrCompute('mixed', () => 'left value', 60_000)).toBe('left value');
      const entry = (await server.client().getBuffer(valueKey('dogpile', 'mixed')))!;
      let loads = 0;
      for (let i = 0; i < 5; i++) {
        expect(await reader.getOrCompute('mixed', () => `right value ${++loads}`, 60_000)).toBe(`right value ${loads}`);
        expect(await reader.get('mixed')).toBeUndefined();
        expect(await writer.getOrCompute('mixed', () => 'left again', 60_000)).toBe('left value');
      }
      expect((await server.client().getBuffer(valueKey('dogpile', 'mixed')))!.equals(entry)).toBe(true);
      expect(reports).toHaveLength(1);
      expect(reports[0]).toBeInstanceOf(UnknownSerializerError);
      expect(reports[0]).toMatchObject({ code: 'E_UNKNOWN_SERIALIZER', key: 'mixed', written: 'left', own: 'right' });
      // A built-in serializer is read by every process whatever its own: no report.
      const json = createCache({ redis: server.client(), serializer: jsonSerializer });
      await json.set('shared', { a: 1 }, 60_000);
      expect(await reader.get('shared')).toEqual({ a: 1 });
      await json.close();
      expect(reports).toHaveLength(1);
    } finally {
      await Promise.all([writer.close(), reader.close()]);
    }
  });
});
