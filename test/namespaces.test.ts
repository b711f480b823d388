/**
 * Namespaces and `clear()`: `cache.namespace(name)` keeps its keys and tags apart, `clear()`
 * drops a cache's entries (and those of the namespaces inside it) with one generation stamp,
 * checked on read. Across 3 real processes holding the keys in an L1 that would serve them for
 * 60 s: a clear in one drops the copies in all within one delivery, and the next reads load
 * each key once fleet-wide. Also on the in-process store, `{ stale: true }`, and bad input.
 */
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BackendError, createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { useRedis } from './support/use-redis.js';
import { startRedis } from '../tools/redis-server.js';
import { JsonChild, killAllChildren, root } from '../tools/child-process.js';
import { freshId, sleep } from '../tools/basics.js';

const server = useRedis();

/** What "within one delivery" is checked against: far below the 60 s L1 TTL that would otherwise keep serving the copies. */
const DELIVERY_BOUND_MS = 2_000;

afterEach(killAllChildren);
afterAll(killAllChildren);

function counting<T>(value: (run: number) => T) {
  let runs = 0;
  return {
    loader: () => value(++runs),
    runs: () => runs,
  };
}

async function calls(name: string): Promise<number> {
  const stats = String(await server.command('INFO', 'commandstats'));
  return Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

describe('clear() across 3 processes, each holding the keys in a 60 s L1', () => {
  const keys = ['k0', 'k1', 'k2', 'k3', 'k4'];

  async function startWorkers(extra: Record<string, unknown> = {}): Promise<JsonChild[]> {
    const config = { url: server.url, l1Ttl: 60_000, ttl: 600_000, ...extra };
    const workers = Array.from({ length: 3 }, (_, i) => new JsonChild(`ns-${i}`, ['--import', 'tsx', path.join(root, 'test/fixtures/namespace-worker.ts'), JSON.stringify(config)], { cwd: root }));
    await Promise.all(workers.map((w) => w.take('ready', 30_000)));
    return workers;
  }

  async function all(workers: JsonChild[], command: Record<string, unknown>, event: string): Promise<Record<string, unknown>[]> {
    for (const w of workers) w.send(command);
    return Promise.all(workers.map((w) => w.take(event, 30_000)));
  }

  async function runs(ns: string | undefined): Promise<number[]> {
    const redis = server.client();
    return Promise.all(keys.map(async (key) => Number((await redis.get(`runs:${ns ?? ''}:${key}`)) ?? 0)));
  }

  it('ns.clear() drops the namespace\'s copies in every process (and nothing else); the next reads load each key once fleet-wide; cache.clear() drops all', async () => {
    await server.command('FLUSHALL');
    const workers = await startWorkers();
    for (const ns of [undefined, 'a', 'b']) await all(workers, { cmd: 'warm', ns, keys }, 'warm');
    // Warmed: each key loaded once fleet-wide, and held in every process's L1.
    for (const ns of [undefined, 'a', 'b']) expect(await runs(ns)).toEqual([1, 1, 1, 1, 1]);
    await server.client().set('version', '2');

    workers[0]!.send({ cmd: 'clear', ns: 'a' });
    await workers[0]!.take('done', 10_000);
    // Every process stops answering the namespace's keys from memory within one delivery
    // (the L1 would have served them for 60 s), while the others' keys stay held.
    const dropped = await all(workers, { cmd: 'held', ns: 'a', keys, want: 'none', boundMs: DELIVERY_BOUND_MS }, 'held');
    expect(dropped.map((d) => d.held)).toEqual([[], [], []]);
    for (const ns of [undefined, 'b']) {
      const kept = await all(workers, { cmd: 'held', ns, keys, want: 'all', boundMs: 0 }, 'held');
      expect(kept.map((d) => d.held)).toEqual([keys, keys, keys]);
    }
    // All three read the cleared keys at once: each key is loaded once more, fleet-wide.
    const read = await all(workers, { cmd: 'read', ns: 'a', keys }, 'read');
    for (const r of read) expect(r.values).toEqual([2, 2, 2, 2, 2]);
    expect(await runs('a')).toEqual([2, 2, 2, 2, 2]);
    expect(await runs('b')).toEqual([1, 1, 1, 1, 1]);

    // The cache's own clear() drops its keys and every namespace's, in every process.
    workers[1]!.send({ cmd: 'clear' });
    await workers[1]!.take('done', 10_000);
    for (const ns of [undefined, 'a', 'b']) {
      const gone = await all(workers, { cmd: 'held', ns, keys, want: 'none', boundMs: DELIVERY_BOUND_MS }, 'held');
      expect(gone.map((d) => d.held)).toEqual([[], [], []]);
    }
    const again = await all(workers, { cmd: 'read', ns: 'b', keys }, 'read');
    for (const r of again) expect(r.values).toEqual([2, 2, 2, 2, 2]);
    expect(await runs('b')).toEqual([2, 2, 2, 2, 2]);
    await all(workers, { cmd: 'read', keys }, 'read');
    expect(await runs(undefined)).toEqual([2, 2, 2, 2, 2]);
  }, 120_000);

  it('clear({ stale: true }) in one process: every process answers the old values at once while one refresh per key runs fleet-wide', async () => {
    await server.command('FLUSHALL');
    const workers = await startWorkers({ staleWhileRevalidate: 600_000 });
    await all(workers, { cmd: 'warm', ns: 's', keys }, 'warm');
    await server.client().set('version', '2');
    workers[2]!.send({ cmd: 'clear', ns: 's', stale: true });
    await workers[2]!.take('done', 10_000);
    await all(workers, { cmd: 'held', ns: 's', keys, want: 'none', boundMs: DELIVERY_BOUND_MS }, 'held');
    const read = await all(workers, { cmd: 'read', ns: 's', keys }, 'read');
    // Answered at once with the old values (version 0, written before the clear); a process that
    // read after a refresh landed may have the new one (a hit).
    for (const r of read) {
      for (let i = 0; i < keys.length; i++) {
        const answer = [(r.statuses as string[])[i], (r.values as number[])[i]];
        expect([['stale', 0], ['hit', 2]]).toContainEqual(answer);
      }
    }
    expect(read.some((r) => (r.statuses as string[]).includes('stale'))).toBe(true);
    // One refresh per key, fleet-wide.
    const end = performance.now() + 10_000;
    while ((await runs('s')).some((n) => n < 2) && performance.now() < end) await sleep(20);
    await sleep(200);
    expect(await runs('s')).toEqual([2, 2, 2, 2, 2]);
  }, 120_000);
});

const stores: [string, () => DogpileCache][] = [
  ['in process', () => createCache()],
  ['on Redis', () => createCache({ redis: server.client(), prefix: freshId('ns') })],
];

describe.each(stores)('namespaces %s', (_name, make) => {
  it('keep keys apart from the cache and from each other', async () => {
    const cache = make();
    const a = cache.namespace('a');
    const b = cache.namespace('b');
    expect(cache.namespace('a')).toBe(a);
    await a.set('k', 'in a', 60_000);
    await b.set('k', 'in b', 60_000);
    expect(await cache.get('k')).toBeUndefined();
    await cache.set('k', 'root', 60_000);
    expect(await a.get('k')).toBe('in a');
    expect(await b.get('k')).toBe('in b');
    expect(await cache.get('k')).toBe('root');
    expect(await a.getOrCompute('k', () => 'loaded', 60_000)).toBe('in a');
    await a.delete('k');
    expect(await a.get('k')).toBeUndefined();
    expect(await b.get('k')).toBe('in b');
    await cache.close();
  });

  it('keep tags apart: an invalidation in one namespace leaves the same tag elsewhere alone', async () => {
    const cache = make();
    const a = cache.namespace('a');
    const b = cache.namespace('b');
    await a.set('k', 1, { ttl: 60_000, tags: ['t'] });
    await b.set('k', 2, { ttl: 60_000, tags: ['t'] });
    await cache.set('k', 3, { ttl: 60_000, tags: ['t'] });
    await a.invalidateTags(['t']);
    expect(await a.get('k')).toBeUndefined();
    expect(await b.get('k')).toBe(2);
    expect(await cache.get('k')).toBe(3);
    await cache.invalidateTags(['t']);
    expect(await b.get('k')).toBe(2);
    expect(await cache.get('k')).toBeUndefined();
    await cache.close();
  });

  it('clear() drops its own entries and those of the namespaces inside it, not the enclosing ones', async () => {
    const cache = make();
    const a = cache.namespace('a');
    const inner = a.namespace('x');
    const other = cache.namespace('b');
    await Promise.all([cache.set('k', 0, 60_000), a.set('k', 1, 60_000), inner.set('k', 2, 60_000), other.set('k', 3, 60_000)]);
    await inner.clear();
    expect(await inner.get('k')).toBeUndefined();
    expect(await a.get('k')).toBe(1);
    await inner.set('k', 22, 60_000);
    expect(await inner.get('k')).toBe(22);
    await a.clear();
    expect([await cache.get('k'), await a.get('k'), await inner.get('k'), await other.get('k')]).toEqual([0, undefined, undefined, 3]);
    // A value written after the clear is kept; a loader runs again for a cleared key.
    const { loader, runs } = counting((n) => n);
    expect(await a.getOrCompute('k', loader, 60_000)).toBe(1);
    expect(await a.getOrCompute('k', loader, 60_000)).toBe(1);
    expect(runs()).toBe(1);
    await cache.clear();
    expect([await cache.get('k'), await a.get('k'), await inner.get('k'), await other.get('k')]).toEqual([undefined, undefined, undefined, undefined]);
    expect(cache.peek('k')).toBeUndefined();
    expect(await a.getOrCompute('k', loader, 60_000)).toBe(2);
    await cache.close();
  });

  it('clear({ stale: true }) serves the old value within its stale window while one refresh runs', async () => {
    const cache = make();
    const ns = cache.namespace('s');
    await ns.set('k', 'old', 60_000);
    const refresh = counting(() => 'new');
    // Without a stale window the entry is a miss.
    await ns.clear({ stale: true });
    expect(await ns.get('k')).toBeUndefined();
    await ns.getOrCompute('w', () => 'old', { ttl: 60_000, staleWhileRevalidate: 60_000 });
    await ns.clear({ stale: true });
    const first = await ns.resolve('w', refresh.loader, { ttl: 60_000, staleWhileRevalidate: 60_000 });
    expect([first.status, first.value]).toEqual(['stale', 'old']);
    for (let i = 0; i < 200 && refresh.runs() === 0; i++) await sleep(5);
    for (let i = 0; i < 200; i++) {
      if ((await ns.resolve('w', refresh.loader, { ttl: 60_000, staleWhileRevalidate: 60_000 })).value === 'new') break;
      await sleep(5);
    }
    expect((await ns.resolve('w', refresh.loader, { ttl: 60_000, staleWhileRevalidate: 60_000 })).value).toBe('new');
    expect(refresh.runs()).toBe(1);
    await cache.close();
  });

  it('refuses bad names and options with InvalidOptionError', async () => {
    const cache = make();
    for (const name of ['', 'a/b', 'a{b', 'c}', 'x'.repeat(257), 1, null, undefined]) {
      expect(() => cache.namespace(name as string), String(name)).toThrow(InvalidOptionError);
    }
    expect(() => cache.namespace('')).toThrow(/name/);
    for (const options of [null, 'stale', { stale: 'yes' }, { stale: 1 }, { hard: true }]) {
      await expect(cache.clear(options as never), JSON.stringify(options)).rejects.toThrow(InvalidOptionError);
    }
    await expect(cache.clear({ stale: 'yes' } as never)).rejects.toThrow(/stale/);
    await cache.close();
  });

  it('a closed namespace is closed; the name gives a new one; closing the cache closes its namespaces', async () => {
    const cache = make();
    const a = cache.namespace('a');
    await a.set('k', 1, 60_000);
    await a.close();
    await expect(a.get('k')).rejects.toThrow(/closed/);
    const again = cache.namespace('a');
    expect(again).not.toBe(a);
    expect(await again.get('k')).toBe(cache.distributed ? 1 : undefined);
    await cache.close();
    await expect(again.get('k')).rejects.toThrow(/closed/);
    expect(() => cache.namespace('b')).toThrow(/closed/);
  });
});

describe('namespaces on Redis', () => {
  it('clear() is one small write whatever the number of entries (no scan, no delete), and nothing is written for bad input', async () => {
    const redis = server.client();
    const prefix = freshId('cost');
    const cache = createCache({ redis, prefix });
    const ns = cache.namespace('many');
    await Promise.all(Array.from({ length: 500 }, (_, i) => ns.set(`k${i}`, i, 60_000)));
    expect(await ns.get('k0')).toBe(0);
    const before = await redis.dbsize();
    await expect(ns.clear({ stale: 'no' } as never)).rejects.toThrow(InvalidOptionError);
    expect(() => ns.namespace('x/y')).toThrow(InvalidOptionError);
    expect(await redis.dbsize()).toBe(before);
    await redis.call('CONFIG', 'RESETSTAT');
    await ns.clear();
    expect((await calls('evalsha')) + (await calls('eval'))).toBe(1);
    expect(await calls('set')).toBe(1);
    expect((await calls('scan')) + (await calls('keys')) + (await calls('del')) + (await calls('unlink'))).toBe(0);
    expect(await redis.dbsize()).toBe(before + 1);
    expect(await ns.get('k0')).toBeUndefined();
    expect(await ns.get('k499')).toBeUndefined();
    // The entries of the namespace live under their own prefix; the stamp under the cache's.
    expect(await redis.exists(`${prefix}:n/many:v:{k1}`)).toBe(1);
    expect(await redis.exists(`${prefix}:g:t:{/many}`)).toBe(1);
    await cache.close();
  });

  it('another cache on its own connection drops its L1 copy when the namespace is cleared', async () => {
    const prefix = freshId('two');
    const a = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    const b = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    await a.namespace('n').set('k', 'v1', 600_000);
    for (let i = 0; i < 100 && b.namespace('n').peek('k') === undefined; i++) {
      await b.namespace('n').get('k');
      await sleep(5);
    }
    expect(b.namespace('n').peek('k')).toBe('v1');
    await a.namespace('n').clear();
    for (let i = 0; i < 400 && b.namespace('n').peek('k') !== undefined; i++) await sleep(5);
    expect(b.namespace('n').peek('k')).toBeUndefined();
    expect(await b.namespace('n').get('k')).toBeUndefined();
    await a.close();
    await b.close();
  });
});

describe('clear() when Redis does not answer', () => {
  it('rejects with BackendError within commandTimeout and reports backendError (operation clear)', async () => {
    const own = await startRedis();
    const cache = createCache({ redis: own.client(), commandTimeout: 100, backendCooldown: 50 });
    const reported: string[] = [];
    cache.on('backendError', (e) => reported.push(e.operation));
    await cache.namespace('n').set('k', 1, 60_000);
    // The server sleeps far longer than commandTimeout: only the bound can end the call.
    await own.debugSleepInBackground(1500);
    await expect(cache.clear()).rejects.toThrow(BackendError);
    await expect(cache.clear()).rejects.toThrow(/commandTimeout/);
    expect(reported).toContain('clear');
    await sleep(1600);
    await cache.close();
    await own.stop();
  });
});
