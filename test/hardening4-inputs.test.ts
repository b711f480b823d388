/**
 * Input hardening: bad input to `getOrComputeMany` (an empty key among good ones, a batch
 * loader's result of an unusable shape) is refused with an `InvalidOptionError` naming the
 * argument and writes nothing, in process and on a real Redis; `RedisLock.resetAll(redis,
 * { prefix })` takes the prefix literally whatever glob characters it holds (a real Redis);
 * the msgpack serializer and an own `__proto__` property.
 */
import { Packr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, RedisLock, type DogpileCache } from '../src/index.js';
import { msgpackSerializer } from '../src/msgpack/index.js';
import { freshId } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

const open: DogpileCache[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((cache) => cache.close()));
});

const stores: Array<[string, () => { cache: DogpileCache; stored: () => Promise<number> }]> = [
  [
    'memory',
    () => {
      const cache = createCache();
      open.push(cache);
      // What the in-process store holds of the keys the tests use.
      const stored = async () => (await cache.getMany(['a', 'b', 'c', 'd'])).filter((v) => v !== undefined).length;
      return { cache, stored };
    },
  ],
  [
    'redis',
    () => {
      const prefix = freshId('h4');
      const cache = createCache({ redis: server.client(), prefix });
      open.push(cache);
      const raw = server.client();
      // Every Redis key under the cache's prefix (values, locks, markers, stamps).
      const stored = async () => (await raw.keys(`${prefix}*`)).length;
      return { cache, stored };
    },
  ],
];

/** The error `promise` rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<InvalidOptionError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(InvalidOptionError);
  return caught as InvalidOptionError;
}

describe.each(stores)('%s: getOrComputeMany refuses bad input before anything is looked up or written', (_name, make) => {
  it.each([
    ['an empty key in the middle', ['a', '', 'b'], 1, /key 1 is empty/],
    ['an empty key last', ['a', 'b', 'c', ''], 3, /key 3 is empty/],
    ['a number among the keys', ['a', 7 as unknown as string, 'b'], 1, /key 1 is number/],
  ])('%s: InvalidOptionError naming keys and the index; the loader never runs; nothing is stored', async (_case, keys, _index, message) => {
    const { cache, stored } = make();
    const loads: string[][] = [];
    const error = await rejection(cache.getOrComputeMany(keys, (toLoad) => {
      loads.push(toLoad);
      return toLoad.map((key) => `value-${key}`);
    }, 60_000));
    expect(error.option).toBe('keys');
    expect(error.message).toMatch(message);
    expect(loads).toEqual([]);
    expect(await stored()).toBe(0);
    expect(await cache.get('a')).toBeUndefined();
  });
});

class MapLike {
  constructor(private readonly entries: Record<string, unknown>) {}
  get(key: string): unknown {
    return this.entries[key];
  }
}

describe.each(stores)('%s: a batch loader that returns an unusable shape', (_name, make) => {
  it.each([
    ['a Set', (keys: string[]) => new Set(keys), /returned a Set/],
    ['a Map-like object that is not a Map', (keys: string[]) => new MapLike(Object.fromEntries(keys.map((k) => [k, k]))), /returned an instance of MapLike/],
    ['a string', (keys: string[]) => keys.join(','), /returned a string/],
    ['a number', () => 42, /returned number 42/],
    ['null', () => null, /returned null/],
    ['undefined', () => undefined, /returned undefined/],
    ['a typed array', (keys: string[]) => new Uint8Array(keys.length), /returned an instance of Uint8Array/],
  ])('%s: rejects with InvalidOptionError naming loader, what it returned and what is accepted; nothing is stored', async (_case, loader, returned) => {
    const { cache, stored } = make();
    const error = await rejection(cache.getOrComputeMany(['a', 'b'], loader as never, 60_000));
    expect(error.option).toBe('loader');
    expect(error.message).toMatch(returned);
    expect(error.message).toMatch(/a Map, a plain object keyed by key, or an array/);
    expect(await stored()).toBe(0);
    // Nothing held: the next call loads afresh and stores.
    expect(await cache.getOrComputeMany(['a', 'b'], (keys) => new Map(keys.map((k) => [k, `v-${k}`])), 60_000)).toEqual(['v-a', 'v-b']);
  });

  it('a plain object, an object without a prototype, a Map and an array are taken', async () => {
    const { cache } = make();
    const bare = Object.assign(Object.create(null) as Record<string, string>, { a: 'bare-a' });
    expect(await cache.getOrComputeMany(['a'], () => bare, 60_000)).toEqual(['bare-a']);
    expect(await cache.getOrComputeMany(['b'], () => ({ b: 'plain-b' }), 60_000)).toEqual(['plain-b']);
    expect(await cache.getOrComputeMany(['c'], () => new Map([['c', 'map-c']]), 60_000)).toEqual(['map-c']);
    expect(await cache.getOrComputeMany(['d'], () => ['array-d'], 60_000)).toEqual(['array-d']);
  });
});

describe('RedisLock.resetAll takes its prefix literally', () => {
  it.each([
    ['*', 'p*q', 'pq', 'j'],
    ['?', 'p?q', 'pZq', 'job'],
    ['[ and ]', 'p[xy]q', 'pxq', 'job'],
    ['an unclosed [', 'p[q', undefined, undefined],
    ['a lone ]', 'p]q', undefined, undefined],
    ['\\', 'p\\q', 'pq', 'job'],
  ])('a prefix with %s: its held lock is reset; a lock under a prefix its glob would match is not', async (_chars, prefix, sibling, siblingName) => {
    const redis = server.client();
    const held = new RedisLock(redis, 'job', { prefix, ttl: 60_000, autoRenew: false });
    await held.acquire();
    const other = sibling === undefined ? undefined : new RedisLock(redis, siblingName!, { prefix: sibling, ttl: 60_000, autoRenew: false });
    await other?.acquire();

    expect(await RedisLock.resetAll(redis, { prefix })).toBe(1);
    // The lock under `prefix` is free: another holder takes it at once.
    const next = new RedisLock(redis, 'job', { prefix, ttl: 60_000, autoRenew: false });
    expect(await next.tryAcquire()).not.toBe(false);
    await next.release();
    // The old holder was reset: its release finds nothing of its own to delete.
    expect(await held.release().catch(() => false)).toBe(false);
    if (other !== undefined) {
      // The sibling's lock is still held by its holder.
      const rival = new RedisLock(redis, siblingName!, { prefix: sibling!, ttl: 60_000, autoRenew: false });
      expect(await rival.tryAcquire()).toBe(false);
      expect(await other.release()).toBe(true);
    }
  });
});

describe('msgpackSerializer and an own __proto__ property', () => {
  /** A value with own `__proto__` data properties (as JSON.parse makes them), next to keys that look like their escapes, shared and cyclic references. */
  function protoKeyed() {
    const value = JSON.parse('{"a":1,"__proto__":{"polluted":true},"__proto_":"x","__proto__$":"y","nested":[{"__proto__":5}]}') as Record<string, unknown> & { nested: Array<Record<string, unknown>> };
    value.shared = value.nested[0];
    value.self = value;
    value.map = new Map<unknown, unknown>([['__proto__', 1], ['inner', JSON.parse('{"__proto__":[2]}')]]);
    value.set = new Set([JSON.parse('{"__proto__":"in a set"}')]);
    value.bare = Object.assign(Object.create(null) as Record<string, unknown>, JSON.parse('{"__proto__":"no prototype"}'));
    return value;
  }

  it('a value read back from Redis keeps its own __proto__ properties, in their order, and pollutes no prototype', async () => {
    const prefix = freshId('h4mp');
    const writer = createCache({ redis: server.client(), prefix, serializer: msgpackSerializer });
    const reader = createCache({ redis: server.client(), prefix, serializer: msgpackSerializer });
    open.push(writer, reader);
    const value = protoKeyed();
    await writer.set('proto', value, 60_000);
    const back = (await reader.get('proto')) as ReturnType<typeof protoKeyed>;

    expect(Object.keys(back)).toEqual(Object.keys(value));
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect([back.__proto_, back['__proto__$'], back.a]).toEqual(['x', 'y', 1]);
    expect(Object.getOwnPropertyDescriptor(back.nested[0], '__proto__')?.value).toBe(5);
    expect(back.shared).toBe(back.nested[0]);
    expect(back.self).toBe(back);
    const map = back.map as Map<unknown, unknown>;
    expect(map.get('__proto__')).toBe(1);
    expect(Object.getOwnPropertyDescriptor(map.get('inner'), '__proto__')?.value).toEqual([2]);
    const [inSet] = [...(back.set as Set<object>)];
    expect(Object.getOwnPropertyDescriptor(inSet, '__proto__')?.value).toBe('in a set');
    const bare = back.bare as Record<string, unknown>;
    expect(Object.getOwnPropertyDescriptor(bare, '__proto__')?.value).toBe('no prototype');
  });

  it('a value without one is written as plain MessagePack, as before; "__proto__" as a mere string round-trips too', () => {
    const plain = { a: 1, list: ['x', { b: new Date(5) }], big: 3n };
    expect(Buffer.from(msgpackSerializer.serialize(plain))).toEqual(Buffer.from(new Packr({ structuredClone: true, useBigIntExtension: true }).pack(plain)));
    const strings = { text: '__proto__', __proto_: '__proto__$' };
    expect(msgpackSerializer.deserialize(Buffer.from(msgpackSerializer.serialize(strings)))).toEqual(strings);
  });
});

describe('deleteMany with autoRecovery while Redis is unreachable', () => {
  afterEach(() => server.thaw());

  it('refuses a bad key at once (InvalidOptionError naming keys) instead of queueing it for the replay', async () => {
    const cache = createCache({ redis: server.client({ maxRetriesPerRequest: null }), prefix: freshId('h4q'), autoRecovery: true, commandTimeout: 200 });
    open.push(cache);
    server.freeze();
    // A delete that times out is queued: from then on, writes wait for the replay.
    expect(await cache.delete('queued')).toBe(false);
    const error = await rejection(cache.deleteMany(['a', '']));
    expect(error.option).toBe('keys');
    expect(error.message).toMatch(/key 1 is empty/);
  });
});
