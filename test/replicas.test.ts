/**
 * `replicas` on the cache: a lead counts once `WAIT` confirms that replicas hold it. A master
 * with one replica (two plain servers), and a master without any.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, type CacheEvents } from '../src/index.js';
import { RedisServer } from '../tools/redis-server.js';
import { useRedis } from './support/use-redis.js';

const master = useRedis();
const replica = new RedisServer();

beforeAll(async () => {
  await replica.start();
  await replica.command('REPLICAOF', master.host, master.port);
  const deadline = performance.now() + 15_000;
  // Synced as both ends see it: the replica's link is up and the master counts it online
  // (the number 'majority' is taken from).
  while (
    !String(await replica.command('INFO', 'replication')).includes('master_link_status:up') ||
    !/slave0:.*state=online/.test(String(await master.command('INFO', 'replication')))
  ) {
    if (performance.now() > deadline) throw new Error('the replica did not sync');
    await new Promise((r) => setTimeout(r, 50));
  }
});
afterAll(() => replica.stop());

describe('the cache with replicas', () => {
  it('rejects bad values naming the option, and a replicaTimeout not shorter than commandTimeout', () => {
    expect(() => createCache({ replicas: 'some' as never })).toThrow(InvalidOptionError);
    expect(() => createCache({ replicas: -1 })).toThrow(/Invalid replicas/);
    expect(() => createCache({ replicas: 1, replicaTimeout: 1000, commandTimeout: 1000 })).toThrow(/Invalid replicaTimeout: must be shorter than commandTimeout/);
  });

  it("with replicas: 'majority' a lead waits for the replica, and a stampede still runs one loader", async () => {
    const a = createCache({ redis: master.client(), replicas: 'majority', l1: false });
    const b = createCache({ redis: master.client(), replicas: 'majority', l1: false });
    const errors: unknown[] = [];
    a.on('backendError', (e) => errors.push(e));
    b.on('backendError', (e) => errors.push(e));
    let runs = 0;
    const loader = async () => {
      runs++;
      await new Promise((r) => setTimeout(r, 100));
      return 'replicated';
    };
    const calls = Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).getOrCompute('majority', loader, 60_000));
    expect(await Promise.all(calls)).toEqual(Array(10).fill('replicated'));
    expect(runs).toBe(1);
    expect(errors).toEqual([]);
    expect(String(await master.command('INFO', 'commandstats'))).toMatch(/cmdstat_wait:calls=[1-9]/);
    await a.close();
    await b.close();
  });

  it('when the replica does not confirm, the lead is released, reported as backendError, and the caller still answered', async () => {
    const cache = createCache({ redis: master.client(), replicas: 'majority', replicaTimeout: 50, l1: false });
    const errors: CacheEvents['backendError'][0][] = [];
    cache.on('backendError', (e) => errors.push(e));
    replica.freeze();
    try {
      expect(await cache.getOrCompute('unconfirmed', () => 'answered', 60_000)).toBe('answered');
    } finally {
      replica.thaw();
    }
    expect(errors.map((e) => e.operation)).toContain('lookup');
    expect(String(errors[0]?.error.cause)).toMatch(/reached 0 of the 1 replicas/);
    // The lead lock was released, not left to expire.
    expect(await master.command('EXISTS', 'dogpile:l:{unconfirmed}')).toBe(0);
    await cache.close();
  });
});
