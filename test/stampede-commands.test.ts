/**
 * What a process that waits for another's loader costs Redis. It looks up (no value, a live
 * lock), subscribes to the key's channel, and looks up once more (so that an announcement made
 * before the subscription is not missed); neither look-up reads the server's clock or tries a
 * `SET NX` that must fail: inside the script each is a `GET` of the value and a `PTTL` of the
 * lock (see LOOKUP in src/store/cache-scripts.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { cacheKeys } from '../src/store/key.js';
import { RedisServer } from '../tools/redis-server.js';
import { freshId, waitUntil } from '../tools/basics.js';

/** Calls per command name from `INFO commandstats` (commands run inside scripts included). */
async function commandCalls(server: RedisServer): Promise<Record<string, number>> {
  const client = server.client();
  try {
    const info = String(await client.info('commandstats'));
    const calls: Record<string, number> = {};
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
    return calls;
  } finally {
    client.disconnect();
  }
}

describe('a waiting process', () => {
  let server: RedisServer;
  const caches: DogpileCache[] = [];
  beforeAll(async () => {
    server = await new RedisServer().start();
  });
  afterAll(async () => {
    await Promise.all(caches.splice(0).map((c) => c.close()));
    await server.stop();
  });

  /**
   * A leader holds `key` in its loader while a second cache waits for it; returns what Redis ran
   * from the waiter's first look-up to its look-up after subscribing. `warm`: the waiter has
   * read the server's clock before (as a running process has).
   */
  async function waitOnce(warm: boolean): Promise<(name: string) => number> {
    const prefix = freshId('waitcost');
    const key = freshId('k');
    // Long lock: no renewal of the leader's lock falls inside the measured window.
    const leader = createCache({ redis: server.client(), prefix, lockTtl: 60_000 });
    const waiter = createCache({ redis: server.client(), prefix, lockTtl: 60_000 });
    caches.push(leader, waiter);
    await leader.set(freshId('warm'), 1, 60_000);
    if (warm) await waiter.set(freshId('warm'), 1, 60_000);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let runs = 0;
    const loader = async () => {
      runs++;
      started();
      await gate;
      return 'v';
    };
    const led = leader.getOrCompute(key, loader, 60_000);
    await running;
    const before = await commandCalls(server);
    const waited = waiter.getOrCompute(key, loader, 60_000);
    const channel = cacheKeys(prefix, key).channel;
    const probe = server.client();
    try {
      await waitUntil('the waiter to subscribe to the key\'s channel', async () => Number(((await probe.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]) === 1);
    } finally {
      probe.disconnect();
    }
    // Both look-ups ran: the one before the SUBSCRIBE and the one after it.
    const after = await waitUntil('the look-up after the SUBSCRIBE', async () => {
      const now = await commandCalls(server);
      return (now.evalsha ?? 0) - (before.evalsha ?? 0) >= 2 ? now : undefined;
    });
    const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
    open();
    expect(await Promise.all([led, waited])).toEqual(['v', 'v']);
    expect(runs).toBe(1);
    return delta;
  }

  it('looks up twice around its SUBSCRIBE, each look-up a GET and a PTTL in Redis (no TIME, no SET NX bound to fail)', async () => {
    const delta = await waitOnce(true);
    expect(delta('evalsha')).toBe(2);
    expect(delta('pttl')).toBe(2);
    expect(delta('time')).toBe(0);
    expect(delta('set')).toBe(0);
  });

  it("without a reading of the server's clock yet, its first look-up takes one, though it only waits (one clock)", async () => {
    const delta = await waitOnce(false);
    expect(delta('evalsha')).toBe(2);
    expect(delta('time')).toBe(1);
    expect(delta('set')).toBe(0);
  });
});
