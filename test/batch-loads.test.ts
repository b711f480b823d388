/**
 * `getOrComputeMany(keys, loader, ttl)`: the keys nobody leads are loaded with ONE call of the
 * loader; cached keys are answered from the store; keys another caller loads are waited for,
 * not loaded again; answers come in the order of `keys`; a key the loader leaves out is answered
 * `undefined` and not stored. In one process (in-process store and Redis) and across three real
 * processes on one Redis with overlapping key sets: each key loaded exactly once fleet-wide, one
 * batch call per process in a cold burst. Bad input is refused naming the argument, nothing
 * stored.
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { JsonChild, root } from '../tools/child-process.js';
import { freshId, waitUntil } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

const stores: Array<[string, () => DogpileCache]> = [
  ['memory', () => createCache()],
  ['redis', () => createCache({ redis: server.client(), prefix: freshId('batch') })],
];

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(stores)('%s: getOrComputeMany', (_name, make) => {
  it('loads the missing keys with one loader call; cached keys are not loaded; answers in the order of keys', async () => {
    const cache = make();
    await cache.set('b', 'stored-b', 60_000);
    const calls: string[][] = [];
    const values = await cache.getOrComputeMany(['a', 'b', 'c', 'a'], async (keys) => {
      calls.push(keys);
      return keys.map((key) => `loaded-${key}`);
    }, 60_000);
    expect(values).toEqual(['loaded-a', 'stored-b', 'loaded-c', 'loaded-a']);
    expect(calls).toEqual([['a', 'c']]);
    // Stored: the next call loads nothing.
    const again = await cache.getOrComputeMany(['c', 'a', 'b'], async (keys) => {
      calls.push(keys);
      return [];
    }, 60_000);
    expect(again).toEqual(['loaded-c', 'loaded-a', 'stored-b']);
    expect(calls).toHaveLength(1);
    await cache.close();
  });

  it('takes a Map, an object keyed by key or an array; a key left out is undefined and not stored', async () => {
    const cache = make();
    const fromMap = await cache.getOrComputeMany(['m1', 'm2'], (keys) => new Map(keys.filter((k) => k !== 'm2').map((k) => [k, k.toUpperCase()])), 60_000);
    expect(fromMap).toEqual(['M1', undefined]);
    const fromObject = await cache.getOrComputeMany(['o1', 'o2'], () => ({ o2: 'O2' }), 60_000);
    expect(fromObject).toEqual([undefined, 'O2']);
    expect(await cache.get('m1')).toBe('M1');
    expect(await cache.get('m2')).toBeUndefined();
    expect(await cache.get('o1')).toBeUndefined();
    expect(await cache.get('o2')).toBe('O2');
    await cache.close();
  });

  it('concurrent batches in one process with overlapping keys load each key once', async () => {
    const cache = make();
    const runs = new Map<string, number>();
    const loader = async (keys: string[]) => {
      for (const key of keys) runs.set(key, (runs.get(key) ?? 0) + 1);
      await pause(100);
      return keys.map((key) => `v-${key}`);
    };
    const sets = [['a', 'b', 'c'], ['b', 'c', 'd'], ['c', 'd', 'e']];
    const answers = await Promise.all(sets.map((keys) => cache.getOrComputeMany(keys, loader, 60_000)));
    expect(answers).toEqual(sets.map((keys) => keys.map((key) => `v-${key}`)));
    expect(Object.fromEntries(runs)).toEqual({ a: 1, b: 1, c: 1, d: 1, e: 1 });
    await cache.close();
  });

  it('a loader error reaches every key of its batch; nothing is stored and the next call loads again', async () => {
    const cache = make();
    await expect(cache.getOrComputeMany(['x', 'y'], () => {
      throw new Error('database down');
    }, 60_000)).rejects.toThrow('database down');
    expect(await cache.get('x')).toBeUndefined();
    expect(await cache.getOrComputeMany(['x', 'y'], (keys) => keys, 60_000)).toEqual(['x', 'y']);
    await cache.close();
  });

  it('refuses bad input naming the argument, and stores nothing', async () => {
    const cache = make();
    await expect(cache.getOrComputeMany('a' as unknown as string[], () => [], 60_000)).rejects.toMatchObject({ option: 'keys' });
    await expect(cache.getOrComputeMany(['a', 1 as unknown as string], () => [], 60_000)).rejects.toMatchObject({ option: 'keys' });
    await expect(cache.getOrComputeMany(['a'], null as unknown as () => [], 60_000)).rejects.toMatchObject({ option: 'loader' });
    await expect(cache.getOrComputeMany(['a'], () => [], 0)).rejects.toMatchObject({ option: 'ttl' });
    const wrongLength = cache.getOrComputeMany(['a', 'b'], () => ['only one'], 60_000);
    await expect(wrongLength).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(wrongLength).rejects.toMatchObject({ option: 'loader' });
    expect(await cache.get('a')).toBeUndefined();
    expect(await cache.getOrComputeMany([], () => [], 60_000)).toEqual([]);
    await cache.close();
  });
});

describe('getOrComputeMany and the cache\'s listeners', () => {
  it('sends its batch as soon as every key is led or waited for, whatever the application does with the cache\'s event listeners', async () => {
    const prefix = freshId('batch-listeners');
    const a = createCache({ redis: server.client(), prefix });
    const b = createCache({ redis: server.client(), prefix });
    try {
      // Another process leads "b" and holds it until the gate opens.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const other = b.getOrCompute('b', async () => {
        await gate;
        return 'from b';
      }, 60_000);
      await waitUntil('b led by the other cache', async () => (await server.command('EXISTS', `${prefix}:l:{b}`)) === 1);
      // An application that drops every listener the moment a miss starts (here: on "a").
      a.on('miss', () => a.removeAllListeners());
      const loaded: string[][] = [];
      const many = a.getOrComputeMany(['a', 'b'], (keys) => {
        loaded.push(keys);
        return keys.map((key) => `loaded ${key}`);
      }, 60_000);
      // "a" is loaded while "b" is still being computed elsewhere: the batch did not wait for it.
      await waitUntil('the batch loader called', () => loaded.length > 0);
      expect(loaded).toEqual([['a']]);
      open();
      expect(await many).toEqual(['loaded a', 'from b']);
      expect(await other).toBe('from b');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('getOrComputeMany across processes', () => {
  const children: JsonChild[] = [];
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.exit()));
  });

  it('three processes with overlapping key sets: each key loaded exactly once fleet-wide, one batch call per process, identical answers', async () => {
    const prefix = freshId('batch-fleet');
    const config = { url: server.url, prefix, ttl: 60_000, loadMs: 300 };
    for (let i = 0; i < 3; i++) {
      children.push(new JsonChild(`batch-${i}`, ['--import', 'tsx', path.join(root, 'test/fixtures/batch-worker.ts'), JSON.stringify(config)], { cwd: root }));
    }
    await Promise.all(children.map((c) => c.take('ready', 30_000)));
    const sets = [
      ['k1', 'k2', 'k3', 'k4'],
      ['k3', 'k4', 'k5', 'k6'],
      ['k5', 'k6', 'k7', 'k1'],
    ];
    children.forEach((c, i) => c.send({ cmd: 'many', keys: sets[i] }));
    const replies = await Promise.all(children.map((c) => c.take('many', 30_000)));

    const redis = server.client();
    const all = [...new Set(sets.flat())].sort();
    const runs = await Promise.all(all.map(async (key) => Number((await redis.get(`runs:${key}`)) ?? 0)));
    expect(Object.fromEntries(all.map((key, i) => [key, runs[i]]))).toEqual(Object.fromEntries(all.map((key) => [key, 1])));
    for (const reply of replies) expect((reply.batches as string[][]).length).toBeLessThanOrEqual(1);
    // Every process answers a key with the one value loaded for it.
    const byKey = new Map<string, unknown>();
    replies.forEach((reply, i) => {
      (reply.values as { key: string; pid: number }[]).forEach((value, j) => {
        const key = sets[i]![j]!;
        expect(value.key).toBe(key);
        if (byKey.has(key)) expect(value).toEqual(byKey.get(key));
        byKey.set(key, value);
      });
    });
    expect(byKey.size).toBe(all.length);
  });
});
