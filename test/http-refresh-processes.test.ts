/**
 * Background refresh across processes: Express and Fastify server processes behind one Redis,
 * with `staleWhileRevalidate`. Once a response's TTL has passed, every request of a burst spread
 * over the processes is answered with the stored response at once, and the fleet runs the
 * handler once for the refresh, for no client.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { FRAMEWORKS, type Framework } from './fixtures/http-apps.js';

const HOST = 'app.test';
const redis = useRedis();
let agent: http.Agent;

async function spawnServer(framework: Framework): Promise<number> {
  const worker = NodeChild.tsx('test/fixtures/http-server.ts', [
    '--framework', framework, '--redis', redis.url, '--prefix', 'bg', '--ttl', '1000', '--stale-while-revalidate', '30000',
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

describe('background refresh across processes', () => {
  for (const framework of FRAMEWORKS) {
    it(`${framework}: every request of a burst over three processes is answered STALE before the one background handler run ends`, async () => {
      const ports = await Promise.all([spawnServer(framework), spawnServer(framework), spawnServer(framework)]);
      // A "gated" id: the refresh's handler run waits until the test opens the gate.
      const id = freshId('gated');
      const path = `/slow?id=${id}`;
      const get = (port: number) => fetchReply(port, path, { agent, headers: { host: HOST } });
      const client = redis.client();
      const fill = await get(ports[0]!);
      expect(fill.headers['x-cache']).toBe('MISS');
      await sleep(1300); // the TTL (1 s) is over; the response is kept 30 s more
      const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => get(ports[i % ports.length]!)));
      // Every reply is in, and the refresh's handler has not got past its gate: no request waited for it.
      expect(await client.get(`passed:${id}`)).toBeNull();
      expect(burst.map((r) => [r.status, r.headers['x-cache'], r.text])).toEqual(Array(30).fill([200, 'STALE', fill.text]));
      await waitUntil('the refresh started', async () => (await client.get(`runs:slow:${id}`)) === '2');
      await client.set(`open:${id}`, '1');
      await waitUntil('the refreshed response is stored', async () => (await get(ports[1]!)).headers['x-cache'] === 'HIT');
      // One handler run for the refresh, in the whole fleet.
      expect(await client.get(`runs:slow:${id}`)).toBe('2');
      expect(await client.get(`passed:${id}`)).toBe('1');
    });
  }
});
