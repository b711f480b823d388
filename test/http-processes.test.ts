/**
 * The claim of the HTTP adapters, proved with processes: several Express and Fastify server
 * processes behind one Redis, hundreds of concurrent requests for one cold resource, and the
 * route handler runs once in total.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';
import { freshId, sleep } from '../tools/basics.js';
import { fetchReply, request, type Reply } from '../tools/http-client.js';
import type { Framework } from './fixtures/http-apps.js';
import { createCache } from '../src/index.js';

const HOST = 'app.test'; // every process sees the same Host, as behind a load balancer

interface Server {
  framework: Framework;
  worker: NodeChild;
  port: number;
}

const redis = useRedis();
let agent: http.Agent;
let nonce = 0;
const servers: Record<'express' | 'fastify', Server[]> = { express: [], fastify: [] };

async function spawnServer(framework: Framework, extra: string[] = []): Promise<Server> {
  const worker = NodeChild.tsx('test/fixtures/http-server.ts', [
    '--framework', framework, '--redis', redis.url, '--prefix', 'proc', '--hit-for-miss-ttl', '2000', ...extra,
  ]);
  const line = await worker.waitFor((l) => l.includes('"listening"'));
  return { framework, worker, port: (JSON.parse(line) as { port: number }).port };
}

async function stats(server: Server): Promise<Record<string, number>> {
  const n = ++nonce;
  server.worker.write(`${JSON.stringify({ cmd: 'stats', nonce: n })}\n`);
  const line = await server.worker.waitFor((l) => l.includes('"stats"') && l.includes(`"nonce":${n},`));
  return JSON.parse(line) as Record<string, number>;
}

async function stop(server: Server): Promise<void> {
  server.worker.write('{"cmd":"exit"}\n');
  await server.worker.exited;
}

async function runs(route: string, id: string): Promise<number> {
  return Number((await redis.command('GET', `runs:${route}:${id}`)) ?? 0);
}

/** Resolves once a handler run for `route`/`id` has been counted (the leader is leading). */
async function handlerStarted(route: string, id: string): Promise<void> {
  while ((await runs(route, id)) === 0) await sleep(5);
}

/** `n` concurrent GETs of `path`, spread round-robin over `targets`. */
function burst(targets: Server[], n: number, path: string): Promise<(Reply & { via: Framework; port: number })[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const target = targets[i % targets.length]!;
      const reply = await fetchReply(target.port, path, { agent, headers: { host: HOST } });
      return { ...reply, via: target.framework, port: target.port };
    }),
  );
}

function tally(replies: Reply[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of replies) out[r.xCache ?? 'none'] = (out[r.xCache ?? 'none'] ?? 0) + 1;
  return out;
}

beforeAll(async () => {
  agent = new http.Agent({ keepAlive: true, maxSockets: 600 });
  const started = await Promise.all([spawnServer('express'), spawnServer('express'), spawnServer('fastify'), spawnServer('fastify')]);
  servers.express = started.filter((s) => s.framework === 'express');
  servers.fastify = started.filter((s) => s.framework === 'fastify');
});

afterAll(async () => {
  agent?.destroy();
  await Promise.all([...servers.express, ...servers.fastify].map((s) => stop(s).catch(() => {})));
  await killAllChildren();
});

describe('HTTP adapters across processes sharing one Redis', () => {
  it.each([
    ['two Express processes', () => servers.express],
    ['two Fastify processes', () => servers.fastify],
    ['an Express and a Fastify process', () => [servers.express[0]!, servers.fastify[0]!]],
  ])('%s: 500 concurrent requests for a cold 200 ms route run the handler once', async (_label, targets) => {
    const id = freshId();
    const path = `/slow?id=${id}&ms=200`;
    const before = await Promise.all(targets().map(stats));
    const replies = await burst(targets(), 500, path);
    const afterStats = await Promise.all(targets().map(stats));

    // If this fails, the cache events say why (a backendError means a Redis call went past
    // commandTimeout and the process fell back to running the handler on its own).
    const events = afterStats.map((s, i) => Object.fromEntries(Object.entries(s).filter(([k]) => k !== 'event' && k !== 'nonce').map(([k, v]) => [k, v - (before[i]![k] ?? 0)])));
    expect({ runs: await runs('slow', id), events }).toEqual({ runs: 1, events: events.map(() => ({ waitTimeout: 0, backendError: 0, loaderError: 0, lockLost: 0 })) });
    const expected = { resource: 'slow', id, query: { id, ms: '200' } };
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.text).toBe(replies[0]!.text);
    }
    expect(JSON.parse(replies[0]!.text)).toEqual(expected);
    const counts = tally(replies);
    expect(counts.MISS).toBe(1);
    expect((counts.COALESCED ?? 0) + (counts.HIT ?? 0)).toBe(499);
    expect(counts.COALESCED).toBeGreaterThan(0);
    // Every process answered its share, and only one of them ran the handler.
    for (const target of targets()) expect(replies.filter((r) => r.port === target.port)).toHaveLength(500 / targets().length);

    const after = await burst(targets(), 4, path);
    expect(tally(after)).toEqual({ HIT: 4 });
    expect(await runs('slow', id)).toBe(1);
  });

  it('a 500 is not cached and releases the waiters of every process at once', async () => {
    const all = [...servers.express, ...servers.fastify];
    const id = freshId();
    const before = await Promise.all(all.map(stats));
    const first = await burst(all, 40, `/boom?id=${id}&ms=200`);
    for (const r of first) {
      expect(r.status).toBe(500);
      expect(r.xCache).toBe('MISS');
    }
    // The leader's run, then each waiter's own run as soon as the 500 was announced.
    expect(await runs('boom', id)).toBe(40);
    // With a hit-for-miss marker set, the next burst does not queue behind a leader either.
    const second = await burst(all, 40, `/boom?id=${id}&ms=200`);
    expect(second.every((r) => r.status === 500 && r.xCache === 'MISS')).toBe(true);
    expect(await runs('boom', id)).toBe(80);
    const after = await Promise.all(all.map(stats));
    after.forEach((s, i) => {
      expect(s.waitTimeout).toBe(before[i]!.waitTimeout);
      expect(s.loaderError).toBe(before[i]!.loaderError);
    });
  });

  // The leader's client hanging up costs no extra handler run: its handler still runs to the
  // end, and its response goes to the waiters of every process and into the cache.
  const everyone = () => [...servers.express, ...servers.fastify];

  it.each(['express', 'fastify'] as const)(
    "%s leader: its client hangs up before the response (the handler takes 2.5 s): one run for every process's waiters",
    async (framework) => {
      const id = freshId();
      const path = `/slow?id=${id}&ms=2500`;
      const leader = request(servers[framework][0]!.port, path, { abortAfter: 50, headers: { host: HOST } });
      await handlerStarted('slow', id);
      const waiters = await burst(everyone(), 30, path);
      expect(await leader).toBeUndefined();
      expect(await runs('slow', id)).toBe(1);
      expect(waiters.filter((r) => !(r.status === 200 && r.xCache !== 'MISS')).map((r) => [r.status, r.xCache, r.via])).toEqual([]);
      expect(new Set(waiters.map((r) => r.text)).size).toBe(1);
      expect(tally(await burst(everyone(), 4, path))).toEqual({ HIT: 4 });
      expect(await runs('slow', id)).toBe(1);
    },
  );

  it.each([
    ['express', 'stream'],
    ['express', 'chunks'],
    ['fastify', 'stream'],
    ['fastify', 'chunks'],
  ] as const)("%s leader: its client hangs up mid-body (/%s): one run, the whole body for every process's waiters", async (framework, route) => {
    const id = freshId();
    const size = 200_000;
    const path = `/${route}?id=${id}&size=${size}&gap=60`;
    const leader = request(servers[framework][0]!.port, path, { abortOnData: true, headers: { host: HOST } });
    await handlerStarted(route, id);
    const waiters = await burst(everyone(), 30, path);
    expect(await leader).toBeUndefined();
    expect(await runs(route, id)).toBe(1);
    expect(waiters.filter((r) => !(r.status === 200 && r.xCache !== 'MISS')).map((r) => [r.status, r.xCache, r.via])).toEqual([]);
    expect(waiters[0]!.body.length).toBe(size);
    expect(waiters.every((r) => r.body.equals(waiters[0]!.body))).toBe(true);
    const after = await burst(everyone(), 4, path);
    expect(tally(after)).toEqual({ HIT: 4 });
    expect(after.every((r) => r.body.equals(waiters[0]!.body))).toBe(true);
    expect(await runs(route, id)).toBe(1);
  });

  it.each(['express', 'fastify'] as const)(
    '%s leader: its handler fails after its client left: exactly one new leader across processes, and no marker',
    async (framework) => {
      const id = freshId();
      const path = `/fail-if-gone?id=${id}&ms=300`;
      const leader = request(servers[framework][0]!.port, path, { abortAfter: 50, headers: { host: HOST } });
      await handlerStarted('fail-if-gone', id);
      const waiters = await burst(everyone(), 30, path);
      expect(await leader).toBeUndefined();
      expect(await runs('fail-if-gone', id)).toBe(2);
      expect(waiters.filter((r) => r.status !== 200).map((r) => [r.status, r.xCache, r.via])).toEqual([]);
      expect(new Set(waiters.map((r) => r.text)).size).toBe(1);
      expect(tally(waiters).MISS).toBe(1);
      // No hit-for-miss marker was left (the servers set one for 2 s after a response that
      // cannot be shared): the next requests are hits.
      expect(tally(await burst(everyone(), 4, path))).toEqual({ HIT: 4 });
      expect(await runs('fail-if-gone', id)).toBe(2);
    },
  );

  it('when the leading process dies, a waiting process takes over after the lock TTL', async () => {
    // Its lock lives 1 s (the others keep the default 5 s: a leader starved of CPU for longer
    // than its lock TTL is taken over, by design, and this machine may be busy).
    const doomed = await spawnServer('express', ['--lock-ttl', '1000']);
    const id = freshId();
    const path = `/slow?id=${id}&ms=1500`;
    const leader = request(doomed.port, path, { headers: { host: HOST }, abortAfter: 60_000 });
    // Wait until the doomed process has started the handler, then queue the others behind it.
    await handlerStarted('slow', id);
    const waiters = burst([...servers.express, ...servers.fastify], 20, path);
    await sleep(50);
    doomed.worker.kill('SIGKILL');
    await doomed.worker.exited;
    const replies = await waiters;
    await leader;
    expect(await runs('slow', id)).toBe(2);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(tally(replies).MISS).toBe(1);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
  });

  it('a successful write in one process invalidates the stored GET in every process', async () => {
    const id = freshId();
    const path = `/slow?id=${id}`;
    const send = (target: Server, method = 'GET') => fetchReply(target.port, path, { agent, method, headers: { host: HOST } });
    const first = await send(servers.express[0]!);
    expect(first.xCache).toBe('MISS');
    // The leader's response reaches its client before its store lands in Redis: a request
    // right after it may still join that run (COALESCED) instead of reading the entry (HIT).
    expect(['HIT', 'COALESCED']).toContain((await send(servers.fastify[0]!)).xCache);
    expect(['HIT', 'COALESCED']).toContain((await send(servers.express[1]!)).xCache);
    expect(await runs('slow', id)).toBe(1);
    const write = await send(servers.express[1]!, 'POST');
    expect(write.status).toBe(200);
    const after = await send(servers.fastify[1]!);
    expect(after.xCache).toBe('MISS');
    expect(await runs('slow', id)).toBe(2);
    // And from a Fastify process to an Express one.
    await send(servers.fastify[0]!, 'DELETE');
    expect((await send(servers.express[0]!)).xCache).toBe('MISS');
    expect(await runs('slow', id)).toBe(3);
  });

  it('a response tagged by its Dogpile-Tags and purged by invalidateTags is recomputed once on the next burst, over every process', async () => {
    const cache = createCache({ redis: redis.url, prefix: 'proc' });
    try {
      const id = freshId();
      const path = `/tagged?id=${id}&ms=150`;
      const all = [...servers.express, ...servers.fastify];
      const before = await burst(all, 40, path);
      expect(new Set(before.map((r) => r.text)).size).toBe(1);
      expect(await runs('tagged', id)).toBe(1);
      for (const r of before) expect(r.headers['dogpile-tags']).toBeUndefined();
      // Let the leader's store land, then purge by one of the tags the handler named.
      await sleep(300);
      await cache.invalidateTags([`item:${id}`]);
      const after = await burst(all, 40, path);
      expect(new Set(after.map((r) => r.text)).size).toBe(1);
      expect(after[0]!.text).not.toBe(before[0]!.text);
      expect(tally(after).MISS).toBe(1);
      expect(await runs('tagged', id)).toBe(2);
      // Served from the store again by every process.
      for (const target of all) expect(['HIT', 'COALESCED']).toContain((await fetchReply(target.port, path, { agent, headers: { host: HOST } })).xCache);
      expect(await runs('tagged', id)).toBe(2);
    } finally {
      await cache.close();
    }
  });

  it('every Vary variant stored by one process is found by the others', async () => {
    const id = freshId();
    const path = `/vary?id=${id}`;
    const send = (target: Server, lang: string) => fetchReply(target.port, path, { agent, headers: { host: HOST, 'accept-language': lang } });
    // A varying response is stored (variant, then the URL's record) after it was sent: let
    // those writes land before the next request (a request that comes before the record
    // stores its variant under a generation of its own, orphaning the first one) and before
    // asking the other processes.
    expect((await send(servers.express[0]!, 'de')).xCache).toBe('MISS');
    await sleep(300);
    expect((await send(servers.express[0]!, 'en')).xCache).toBe('MISS');
    await sleep(300);
    for (const target of [...servers.fastify, servers.express[1]!]) {
      for (const lang of ['en', 'de']) {
        const reply = await send(target, lang);
        // Served by the runs of the first process: read from the store (HIT), or, right after
        // the leader answered and before its store landed, by joining its run (COALESCED).
        expect([target.framework, lang, reply.text]).toEqual([target.framework, lang, `lang=${lang}`]);
        expect(['HIT', 'COALESCED']).toContain(reply.xCache);
      }
    }
    expect(await runs('vary', id)).toBe(2);
  });
});
