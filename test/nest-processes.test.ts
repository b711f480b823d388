/**
 * Two instances of one Nest 12 app, each in its own process, on one Redis — per platform.
 * Requests carry the same Host header, as they do behind a load balancer, so both instances
 * compute the same key.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';
import { freshId } from '../tools/basics.js';
import { get, json, type Reply } from '../tools/http-client.js';

const H = { host: 'api.example.test' };

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
  // The request that wins a refresh runs the handler (the background refresh: nest-refresh.test.ts).
  const worker = NodeChild.tsx('test/fixtures/nest-app.ts', [platform, server.url, prefix, 'foreground']);
  const line = await worker.waitFor((l) => l.startsWith('listening '), 45_000);
  return { worker, port: Number(line.split(' ')[1]) };
}

describe.each(['express', 'fastify'])('two %s app instances in separate processes', (platform) => {
  let instances: { worker: NodeChild; port: number }[] = [];

  beforeAll(async () => {
    const prefix = `nest-procs-${platform}`;
    instances = await Promise.all([startInstance(platform, prefix), startInstance(platform, prefix)]);
  }, 90_000);

  afterAll(async () => {
    for (const { worker } of instances) worker.kill();
    await Promise.all(instances.map((i) => i.worker.exited));
  });

  /** `n` concurrent requests, alternating between the instances. */
  const burst = (n: number, path: string) => Promise.all(Array.from({ length: n }, (_, i) => get(instances[i % 2]!.port, path, H)));

  it('300 concurrent requests to a cold route with a 200 ms handler: one handler run, equal responses', async () => {
    const run = freshId();
    const replies = await burst(300, `/stampede?run=${run}`);
    expect(await count('stampede', run)).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(json(replies[0]!)).toMatchObject({ run, n: 1 });
    const xCache = tally(replies);
    expect(xCache.MISS).toBe(1);
    expect((xCache.COALESCED ?? 0) + (xCache.HIT ?? 0)).toBe(299);
    // Both instances answered from the one run.
    expect(replies.filter((_, i) => i % 2 === 1).every((r) => r.text === replies[0]!.text)).toBe(true);
    // And both serve it from the cache afterwards.
    const again = await Promise.all(instances.map((i) => get(i.port, `/stampede?run=${run}`, H)));
    expect(again.map((r) => r.xCache)).toEqual(['HIT', 'HIT']);
    expect(again.map((r) => r.text)).toEqual([replies[0]!.text, replies[0]!.text]);
  });

  it('a stale response is served with X-Cache: STALE and an Age past the TTL while one handler run refreshes it', async () => {
    const run = freshId();
    const fill = await get(instances[0]!.port, `/stale?run=${run}`, H);
    expect(fill.xCache).toBe('MISS');
    await new Promise((r) => setTimeout(r, 2100)); // past the 1 s TTL, inside the 30 s window
    let answered = 0;
    const timed = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const reply = await get(instances[i % 2]!.port, `/stale?run=${run}`, H);
        return { reply, order: answered++ };
      }),
    );
    expect(await count('stale', run)).toBe(2);
    const xCache = tally(timed.map((t) => t.reply));
    expect(xCache).toEqual({ MISS: 1, STALE: 19 });
    // No request waited for the refresh (an 800 ms handler run): every STALE response arrived
    // before the response of the request that ran it.
    const refresh = timed.find((t) => t.reply.xCache === 'MISS')!;
    for (const { reply, order } of timed) {
      expect(reply.status).toBe(200);
      if (reply.xCache !== 'STALE') continue;
      expect(reply.text).toBe(fill.text);
      expect(Number(reply.headers.age)).toBeGreaterThanOrEqual(2);
      expect(order).toBeLessThan(refresh.order);
    }
    const refreshed = refresh.reply;
    expect(json(refreshed)).toMatchObject({ run, n: 2 });
    const after = await get(instances[1]!.port, `/stale?run=${run}`, H);
    expect(after.xCache).toBe('HIT');
    expect(after.text).toBe(refreshed.text);
  });

  it("a handler error reaches every client as Nest's 404, at most one run per process, nothing cached", async () => {
    const run = freshId();
    // A long handler, so that every request is waiting before the first run fails.
    const replies = await burst(40, `/slow-missing?run=${run}&ms=1000`);
    const expected = JSON.stringify({ message: `no item ${run}`, error: 'Not Found', statusCode: 404 });
    for (const r of replies) {
      expect(r.status).toBe(404);
      expect(JSON.parse(r.text)).toEqual(JSON.parse(expected));
    }
    const runs = await count('slow-missing', run);
    expect(runs).toBeGreaterThanOrEqual(1);
    expect(runs).toBeLessThanOrEqual(2);
    const after = await get(instances[0]!.port, `/slow-missing?run=${run}&ms=10`, H);
    expect(after.status).toBe(404);
    expect(await count('slow-missing', run)).toBe(runs + 1);
  });

  it('a closed instance exits by itself: the module closed the connections it opened', async () => {
    for (const { worker } of instances) worker.write('close\n');
    for (const { worker } of instances) await worker.waitFor((l) => l === 'closed', 20_000);
    const codes = await Promise.all(instances.map(({ worker }) => exitedWithin(worker, 15_000)));
    expect(codes).toEqual([0, 0]);
  }, 60_000);
});

/** The exit code, or 'alive' if the process is still running after `ms`. */
async function exitedWithin(worker: NodeChild, ms: number): Promise<number | null | 'alive'> {
  let timer: NodeJS.Timeout | undefined;
  const alive = new Promise<'alive'>((resolve) => {
    timer = setTimeout(() => resolve('alive'), ms);
  });
  try {
    return await Promise.race([worker.exited.then((exit) => exit.code), alive]);
  } finally {
    clearTimeout(timer);
  }
}

function tally(replies: Reply[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of replies) out[r.xCache ?? 'none'] = (out[r.xCache ?? 'none'] ?? 0) + 1;
  return out;
}
