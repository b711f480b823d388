/**
 * `{ forceRefresh: true }`: the loader runs now whatever is stored, and its result is stored;
 * forced calls for one key share one run (in a process, and between caches on separate
 * connections to one Redis); plain callers keep being answered from what is stored while it
 * runs. A bad value is refused naming `forceRefresh`.
 */
import { describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const stores: Array<[string, (prefix: string) => DogpileCache]> = [
  ['memory', () => createCache()],
  ['redis', (prefix) => createCache({ redis: server.client(), prefix })],
  ['redis with an L1', (prefix) => createCache({ redis: server.client(), prefix, l1: true })],
];

describe.each(stores)('%s: forceRefresh', (_name, make) => {
  it('runs the loader though a fresh value is stored, stores its result, and plain callers get the stored value meanwhile', async () => {
    const cache = make(freshId('force'));
    await cache.set('k', 'v1', 60_000);
    let runs = 0;
    const slow = async () => {
      runs++;
      await pause(200);
      return `v${runs + 1}`;
    };
    const forced = Promise.all(Array.from({ length: 5 }, () => cache.getOrCompute('k', slow, { ttl: 60_000, forceRefresh: true })));
    await pause(50);
    // While the forced run goes on, plain calls are answered from what is stored.
    expect(await cache.getOrCompute('k', slow, 60_000)).toBe('v1');
    expect(await forced).toEqual(['v2', 'v2', 'v2', 'v2', 'v2']);
    expect(runs).toBe(1);
    expect(await cache.get('k')).toBe('v2');
    expect(await cache.getOrCompute('k', slow, 60_000)).toBe('v2');
    expect(runs).toBe(1);
    await cache.close();
  });

  it('refuses anything but a boolean, naming forceRefresh, and runs nothing', async () => {
    const cache = make(freshId('force'));
    let runs = 0;
    for (const bad of ['yes', 1, null]) {
      await expect(cache.getOrCompute('k', () => ++runs, { ttl: 1000, forceRefresh: bad as unknown as boolean })).rejects.toMatchObject({ option: 'forceRefresh' });
    }
    expect(runs).toBe(0);
    await cache.close();
  });
});

describe('forceRefresh between caches on one Redis', () => {
  it('forced calls from two caches on separate connections share one run; the other cache\'s L1 follows', async () => {
    const prefix = freshId('force-two');
    const a = createCache({ redis: server.client(), prefix, l1: true });
    const b = createCache({ redis: server.client(), prefix, l1: true });
    await a.set('k', 'v1', 60_000);
    expect(await b.getOrCompute('k', () => 'never', 60_000)).toBe('v1');
    let runs = 0;
    const loader = async () => {
      runs++;
      await pause(300);
      return 'v2';
    };
    const results = await Promise.all([
      a.getOrCompute('k', loader, { ttl: 60_000, forceRefresh: true }),
      (async () => {
        await pause(50);
        return b.getOrCompute('k', loader, { ttl: 60_000, forceRefresh: true });
      })(),
    ]);
    expect(results).toEqual(['v2', 'v2']);
    expect(runs).toBe(1);
    const deadline = performance.now() + 5_000;
    while (b.peek('k') !== 'v2' && performance.now() < deadline) await pause(20);
    expect(await b.getOrCompute('k', () => 'never', 60_000)).toBe('v2');
    await Promise.all([a.close(), b.close()]);
  });
});
