/**
 * A look-up that reaches Redis after its caller gave up (`commandTimeout`: a frozen or
 * overloaded server that later runs what was queued) takes no lead lock: otherwise the lock of
 * a caller that is gone would make every other caller of the key wait it out (`lockTtl`) once
 * Redis answers again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { RedisServer } from '../tools/redis-server.js';
import { freshId } from '../tools/basics.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('late look-ups', () => {
  let server: RedisServer | undefined;
  const caches: DogpileCache[] = [];
  afterEach(async () => {
    server?.thaw();
    await Promise.all(caches.splice(0).map((c) => c.close()));
    await server?.stop();
    server = undefined;
  });

  it('a look-up run after its caller gave up leaves no lead lock behind', async () => {
    server = await new RedisServer().start();
    const prefix = freshId('late');
    const cache = createCache({ redis: server.client({ maxRetriesPerRequest: null }), prefix, commandTimeout: 200, backendCooldown: 50, lockTtl: 10_000 });
    caches.push(cache);
    const raw = server.client();
    // The cache learns the server's clock first (a write's and a look-up's deadline is on it).
    await cache.set('warm', 1, 60_000);
    server.freeze();
    // The look-up times out; the call is answered by its own loader without Redis.
    expect(await cache.getOrCompute('k', () => 'local', 60_000)).toBe('local');
    await pause(300);
    server.thaw();
    // Redis now runs the look-up it kept: the caller is gone, so it must take no lock.
    await raw.ping();
    expect(await raw.exists(`${prefix}:l:{k}`)).toBe(0);
    // And the next caller leads at once.
    let runs = 0;
    expect(await cache.getOrCompute('k', () => {
      runs++;
      return 'fresh';
    }, 60_000)).toBe('fresh');
    expect(runs).toBe(1);
  });
});
