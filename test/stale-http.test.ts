/**
 * Stale responses over HTTP, across processes: Express and Fastify server processes behind one
 * Redis, with `staleWhileRevalidate`. Once a response's TTL has passed, every request but one
 * is answered with the stored response at once (`X-Cache: STALE`, `Age` past the TTL) and the
 * request that wins the refresh lead runs the handler (`X-Cache: MISS`): one handler run in
 * the whole fleet per refresh.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { FRAMEWORKS, type Framework } from './fixtures/http-apps.js';

const HOST = 'app.test';
const redis = useRedis();
let agent: http.Agent;

async function spawnServer(framework: Framework): Promise<number> {
  const worker = NodeChild.tsx('test/fixtures/http-server.ts', [
    '--framework', framework, '--redis', redis.url, '--prefix', 'stale', '--ttl', '1000', '--stale-while-revalidate', '30000',
    // The request that wins the refresh runs the handler (the background refresh: http-refresh-processes.test.ts).
    '--refresh', 'foreground',
  ]);
  const line = await worker.waitFor((l) => l.includes('"listening"'));
  return (JSON.parse(line) as { port: number }).port;
}

beforeAll(() => {
  agent = new http.Agent({ keepAlive: true, maxSockets: 200 });
});
afterAll(async () => {
  agent.destroy();
  await killAllChildren();
});

describe('X-Cache: STALE across processes', () => {
  for (const framework of FRAMEWORKS) {
    it(`${framework}: a stale response is served with X-Cache: STALE and an Age past the TTL while one handler run refreshes it`, async () => {
      const ports = await Promise.all([spawnServer(framework), spawnServer(framework), spawnServer(framework)]);
      const id = freshId('stale');
      const handlerMs = 800;
      const path = `/slow?id=${id}&ms=${handlerMs}`;
      const get = async (port: number) => {
        const t0 = performance.now();
        const reply = await fetchReply(port, path, { agent, headers: { host: HOST } });
        return { reply, ms: performance.now() - t0, done: performance.now() };
      };
      const fill = await get(ports[0]!);
      expect(fill.reply.headers['x-cache']).toBe('MISS');
      await sleep(2100); // the TTL (1 s) is over; the response is kept 30 s more
      const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => get(ports[i % ports.length]!)));
      const client = redis.client();
      expect(await client.get(`runs:slow:${id}`)).toBe('2');
      const xCache = burst.map((r) => r.reply.headers['x-cache']);
      expect(xCache.filter((x) => x === 'MISS')).toHaveLength(1);
      expect(xCache.filter((x) => x === 'STALE')).toHaveLength(29);
      // No STALE reply waited for the refresh: each one was complete before the request that
      // runs the handler (a clock-free proof, unlike a latency bound).
      const refresher = burst.find((r) => r.reply.headers['x-cache'] === 'MISS')!;
      for (const r of burst) {
        expect(r.reply.status).toBe(200);
        expect(r.reply.text).toBe(fill.reply.text);
        if (r.reply.headers['x-cache'] === 'STALE') {
          expect(Number(r.reply.headers.age)).toBeGreaterThanOrEqual(2);
          expect(r.done).toBeLessThan(refresher.done);
        }
      }
      // the refreshed response replaced the stale one
      await sleep(handlerMs);
      const after = await get(ports[1]!);
      expect(after.reply.headers['x-cache']).toBe('HIT');
      expect(await client.get(`runs:slow:${id}`)).toBe('2');
    });
  }
});
