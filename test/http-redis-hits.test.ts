/**
 * HTTP hits on Redis without `l1`: a response this process saw fresh is read with one `GET`
 * and served, as `getOrCompute` reads a plain hit (no script, no lock, no options resolved);
 * what that read does not find fresh goes the full way. Real Express and Hono apps, a real Redis.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuard as honoGuard } from '../src/hono/index.js';
import { DecodedResponses } from '../src/http/flow/serve.js';
import { encodeResponse } from '../src/http/rules/response-format.js';
import { createCache, type DogpileCache } from '../src/index.js';
import { freshId } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

interface App {
  port: number;
  /** Handler runs of the one route. */
  runs(): number;
  close(): Promise<void>;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Calls of `command` the server ran, from `INFO commandstats`. */
async function calls(command: string): Promise<number> {
  const info = String(await server.command('INFO', 'commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

/** Every call the server ran, by command. */
async function allCalls(): Promise<Map<string, number>> {
  const info = String(await server.command('INFO', 'commandstats'));
  return new Map([...info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

function newCache(): DogpileCache {
  const cache = createCache({ redis: server.client() });
  closers.push(() => cache.close());
  return cache;
}

async function expressApp(cache: DogpileCache, body: () => string, tags?: string[]): Promise<App> {
  let runs = 0;
  const app = express();
  app.use(dogpileGuard({ cache, ttl: '1m', ...(tags ? { tags: () => tags } : {}) }));
  app.get('/item', (_req, res) => {
    runs++;
    res.json({ body: body() });
  });
  const listening = app.listen(0, '127.0.0.1');
  await new Promise((r) => listening.once('listening', r));
  closers.push(async () => {
    listening.closeAllConnections();
    await new Promise((r) => listening.close(r));
  });
  return { port: (listening.address() as AddressInfo).port, runs: () => runs, close: async () => undefined };
}

async function honoApp(cache: DogpileCache, body: () => string): Promise<App> {
  let runs = 0;
  const app = new Hono();
  app.use('*', honoGuard({ cache, ttl: '1m' }));
  app.get('/item', (c) => {
    runs++;
    return c.json({ body: body() });
  });
  const listening = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((r) => listening.once('listening', r));
  closers.push(async () => {
    (listening as import('node:http').Server).closeAllConnections();
    await new Promise((r) => listening.close(r));
  });
  return { port: (listening.address() as AddressInfo).port, runs: () => runs, close: async () => undefined };
}

describe.each([
  ['express', expressApp],
  ['hono', honoApp],
] as const)('%s: hits on Redis without l1', (_name, make) => {
  it('after the first hit, each hit is one GET: no script runs, the handler does not run', async () => {
    const cache = newCache();
    const app = await make(cache, () => 'one');
    const path = `/item?id=${freshId()}`;
    expect((await fetchReply(app.port, path)).xCache).toBe('MISS');
    // The first hit may take the full way (the process learns the response is fresh from it).
    expect((await fetchReply(app.port, path)).xCache).toBe('HIT');
    const before = await allCalls();
    for (let i = 0; i < 10; i++) {
      const reply = await fetchReply(app.port, path);
      expect(reply.xCache).toBe('HIT');
      expect(JSON.parse(reply.text)).toEqual({ body: 'one' });
    }
    const after = await allCalls();
    const ran = [...after].map(([command, n]) => [command, n - (before.get(command) ?? 0)] as const).filter(([command, n]) => n > 0 && command !== 'info');
    expect(Object.fromEntries(ran)).toEqual({ get: 10 });
    expect(app.runs()).toBe(1);
  });
});

describe('express: hits on Redis without l1, what the one GET does not find fresh', () => {
  it('a tagged response is read with one GET too, and once its tag is invalidated from another process the handler runs again', async () => {
    const cache = newCache();
    let body = 'first';
    const app = await expressApp(cache, () => body, ['item:tagged']);
    const path = `/item?id=${freshId()}`;
    await fetchReply(app.port, path);
    await fetchReply(app.port, path);
    const scripts = (await calls('evalsha')) + (await calls('eval'));
    const gets = await calls('get');
    for (let i = 0; i < 5; i++) expect((await fetchReply(app.port, path)).xCache).toBe('HIT');
    expect((await calls('evalsha')) + (await calls('eval'))).toBe(scripts);
    expect(await calls('get')).toBe(gets + 5);

    // Invalidated by another cache on the same Redis (another process's).
    const other = newCache();
    body = 'second';
    await other.invalidateTags(['item:tagged']);
    const reply = await fetchReply(app.port, path);
    expect(reply.xCache).toBe('MISS');
    expect(JSON.parse(reply.text)).toEqual({ body: 'second' });
    expect(app.runs()).toBe(2);
  });

  it('a response rewritten behind this process is served as rewritten, not as the bytes decoded before (same length, same route)', async () => {
    const cache = newCache();
    let body = 'old';
    const app = await expressApp(cache, () => body);
    const [one, two] = [freshId(), freshId()];
    await fetchReply(app.port, `/item?id=${one}`);
    for (let i = 0; i < 2; i++) expect(JSON.parse((await fetchReply(app.port, `/item?id=${one}`)).text)).toEqual({ body: 'old' });
    body = 'new';
    expect(JSON.parse((await fetchReply(app.port, `/item?id=${two}`)).text)).toEqual({ body: 'new' });
    // The entry of the second URL copied over the first's in Redis, as another process's write
    // this one has not heard of: the first URL's next hit reads the new bytes.
    const keys = (await server.command('KEYS', '*')) as string[];
    const entry = (id: string) => {
      const found = keys.filter((k) => k.includes(id) && !k.includes(':lock'));
      expect(found).toHaveLength(1);
      return found[0]!;
    };
    expect(await server.command('COPY', entry(two), entry(one), 'REPLACE')).toBe(1);
    expect(JSON.parse((await fetchReply(app.port, `/item?id=${one}`)).text)).toEqual({ body: 'new' });
    expect(app.runs()).toBe(2);
  });
});

describe('DecodedResponses', () => {
  const response = (body: string, createdAt = 1_000) => encodeResponse({ createdAt, status: 200, headers: [['content-type', 'text/plain']], vary: [], body: Buffer.from(body) });

  it('decodes equal bytes under one key once, and bytes that differ (same length, same time) anew', () => {
    const decoded = new DecodedResponses();
    const first = decoded.decode(response('aaaa'), 'k')!;
    expect(first.body.toString()).toBe('aaaa');
    // The same bytes read again (a new Buffer each read): the same decoding.
    expect(decoded.known(response('aaaa'), 'k')).toBe(first);
    expect(decoded.decode(response('aaaa'), 'k')).toBe(first);
    // Rewritten in the same millisecond with a body of the same length: not the same response.
    expect(decoded.known(response('bbbb'), 'k')).toBeUndefined();
    const second = decoded.decode(response('bbbb'), 'k')!;
    expect(second.body.toString()).toBe('bbbb');
    // Under another key, the same bytes are decoded for that key.
    expect(decoded.known(response('bbbb'), 'other')).toBeUndefined();
  });

  it('keeps a copy of the bytes it matches, not the buffer the read was a view of', () => {
    const decoded = new DecodedResponses();
    const bytes = response('cccc');
    const reply = Buffer.concat([Buffer.alloc(64), bytes]);
    const view = reply.subarray(64);
    const servable = decoded.decode(view, 'k')!;
    reply.fill(0);
    expect(decoded.known(response('cccc'), 'k')).toBe(servable);
    expect(servable.body.toString()).toBe('cccc');
  });

  it("keeps at most 4 MB of key text and bytes, whatever the keys' length", () => {
    const decoded = new DecodedResponses();
    // Keys of 100 000 characters: about 200 kB each as the key maps count them.
    const keys = Array.from({ length: 30 }, (_, i) => `${i}:`.padEnd(100_000, 'k'));
    for (const key of keys) decoded.decode(response('dddd'), key);
    expect(decoded.known(response('dddd'), keys[29])).toBeDefined();
    expect(decoded.known(response('dddd'), keys[0])).toBeUndefined();
    const kept = keys.filter((key) => decoded.known(response('dddd'), key) !== undefined).length;
    expect(kept).toBeGreaterThan(0);
    expect(kept * (2 * 100_000 + 64)).toBeLessThanOrEqual(4 * 1024 * 1024);
  });

  it('matches large responses by value object only', () => {
    const decoded = new DecodedResponses();
    const big = response('x'.repeat(20_000));
    const servable = decoded.decode(big, 'k')!;
    expect(decoded.known(big, 'k')).toBe(servable);
    expect(decoded.known(Buffer.from(big), 'k')).toBeUndefined();
  });
});
