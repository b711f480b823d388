/**
 * Two instances of one Nest app written for `@nestjs/cache-manager`, on
 * `dogpile-guard/nest/cache-manager`, each in its own process, on one Redis — per platform:
 * cold requests through the global `CacheInterceptor` run the handler once, `wrap()` calls run
 * their function once, and a value inside its `refreshThreshold` is refreshed once, across both
 * processes.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { get, json } from '../tools/http-client.js';

const server = useRedis();
let redis: Redis;

beforeAll(() => {
  redis = server.client();
});

afterAll(async () => {
  await killAllChildren();
});

const count = async (name: string, run: string) => Number((await redis.get(`count:${name}:${run}`)) ?? 0);

async function startInstance(platform: string, prefix: string): Promise<{ worker: NodeChild; port: number }> {
  const worker = NodeChild.tsx('test/fixtures/nest-cache-manager-app.ts', [platform, server.url, prefix]);
  const line = await worker.waitFor((l) => l.startsWith('listening '), 45_000);
  return { worker, port: Number(line.split(' ')[1]) };
}

describe.each(['express', 'fastify'])('two %s instances of a cache-manager app in separate processes', (platform) => {
  let instances: { worker: NodeChild; port: number }[] = [];

  beforeAll(async () => {
    const prefix = `ncm-procs-${platform}`;
    instances = await Promise.all([startInstance(platform, prefix), startInstance(platform, prefix)]);
  }, 90_000);

  afterAll(async () => {
    for (const { worker } of instances) worker.kill();
    await Promise.all(instances.map((i) => i.worker.exited));
  });

  /** `n` concurrent requests, alternating between the instances. */
  const burst = (n: number, path: string) => Promise.all(Array.from({ length: n }, (_, i) => get(instances[i % 2]!.port, path)));

  it('500 concurrent cold requests through CacheInterceptor: one handler run, one answer, served by both', async () => {
    const run = freshId();
    const replies = await burst(500, `/slow/${run}`);
    expect(await count('slow', run)).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(json(replies[0]!)).toMatchObject({ run, n: 1 });
    expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
    const again = await Promise.all(instances.map((i) => get(i.port, `/slow/${run}`)));
    expect(again.map((r) => r.xCache)).toEqual(['HIT', 'HIT']);
  });

  it('200 concurrent wrap() calls across the two processes: fn runs once, every caller gets its value', async () => {
    const run = freshId();
    const replies = await burst(200, `/wrap/${run}`);
    expect(await count('wrap', run)).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    // The requests themselves were not cached by the interceptor: every one called wrap().
    expect(replies.every((r) => r.xCache === undefined)).toBe(true);
  });

  it('100 wrap() calls across the two processes inside refreshThreshold: all answered with the old value, one refresh in all', async () => {
    const run = freshId();
    expect(json(await get(instances[0]!.port, `/wrap/refresh/${run}`))).toEqual({ run, n: 1 });
    await sleep(1300); // past the fresh second, inside the 9 s refresh window
    const replies = await burst(100, `/wrap/refresh/${run}`);
    expect(replies.map((r) => json(r).n)).toEqual(Array(100).fill(1));
    await waitUntil('the refresh to start', async () => (await count('refresh', run)) >= 2, 5000);
    await sleep(500); // the refresh (200 ms) has ended; no request since could start another
    expect(await count('refresh', run)).toBe(2);
    expect(json(await get(instances[1]!.port, `/wrap/refresh/${run}`))).toEqual({ run, n: 2 });
  });
});
