/**
 * One fleet of HTTP servers on one Redis, each a real process: a Hono app on
 * `@hono/node-server` and a Koa app (this Node), a `Bun.serve` process and a `Deno.serve`
 * process (the runtimes from the `bun` and `deno` npm packages), all behind the web-standard
 * adapters (test/fixtures/runtimes/web-server.ts). A cold burst across all of them runs the
 * handler once in total, and every client gets the same bytes.
 *
 * The runtimes are fetched with `npx -y` the first time (.ci/run fetches them before the tests).
 * `DOGPILE_WEB_RUNTIMES=bun,deno` picks the runtimes (default: all four kinds).
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonChild, killAllChildren, npxBinary, root } from '../tools/child-process.js';
import { fetchReply } from '../tools/http-client.js';
import { freshId } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();
const worker = path.join(root, 'test/fixtures/runtimes/web-server.ts');

type Kind = 'hono' | 'koa' | 'bun' | 'deno';
const KINDS: Kind[] = (process.env.DOGPILE_WEB_RUNTIMES?.split(',').filter((k): k is Kind => ['hono', 'koa', 'bun', 'deno'].includes(k)) ?? []).length > 0
  ? (process.env.DOGPILE_WEB_RUNTIMES!.split(',') as Kind[])
  : ['hono', 'koa', 'bun', 'deno'];


const binaries: Partial<Record<'bun' | 'deno', string>> = {};

beforeAll(() => {
  if (KINDS.includes('bun')) binaries.bun = npxBinary('bun', 'bun');
  if (KINDS.includes('deno')) binaries.deno = npxBinary('deno', 'deno');
}, 300_000);

afterAll(() => killAllChildren());

async function start(kind: Kind): Promise<{ child: JsonChild; port: number }> {
  const arg = JSON.stringify({ url: server.url, kind });
  let child: JsonChild;
  switch (kind) {
    case 'hono':
    case 'koa':
      child = new JsonChild(kind, ['--import', 'tsx', worker, arg]);
      break;
    case 'bun':
      child = new JsonChild(kind, [worker, arg], { command: binaries.bun! });
      break;
    case 'deno':
      // --sloppy-imports: the sources import './x.js' for './x.ts', as TypeScript's NodeNext wants.
      child = new JsonChild(kind, ['run', '-A', '--sloppy-imports', worker, arg], { command: binaries.deno! });
      break;
  }
  const ready = await child.take('ready', 60_000);
  expect(ready.runtime).toBe(kind === 'bun' || kind === 'deno' ? kind : `node${process.versions.node.split('.')[0]}`);
  return { child, port: ready.port as number };
}

describe(`one Redis, one cold burst across ${KINDS.join(', ')} processes`, () => {
  it('runs the handler once in total; every client of every process gets the same body', async () => {
    const fleet = await Promise.all(KINDS.map(start));
    try {
      for (let round = 0; round < 3; round++) {
        const id = freshId('web');
        const path = `/burst?id=${id}&ms=300`;
        // One Host for the whole fleet, as behind a load balancer (the key includes the host).
        const replies = await Promise.all(fleet.flatMap(({ port }) => Array.from({ length: 8 }, () => fetchReply(port, path, { headers: { host: 'shop.example' } }))));
        expect(Number(await server.client().get(`${id}:runs`))).toBe(1);
        for (const r of replies) expect(r.status).toBe(200);
        expect(new Set(replies.map((r) => r.text))).toEqual(new Set([replies[0]!.text]));
        expect(replies[0]!.text).toMatch(new RegExp(`^burst ${id} [0-9a-f]{16}$`));
        expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
        // Every process answered from the one run (its own X-Runtime came with the stored response).
        expect(new Set(replies.map((r) => r.headers['x-runtime'])).size).toBe(1);
        const again = await Promise.all(fleet.map(({ port }) => fetchReply(port, path, { headers: { host: 'shop.example' } })));
        expect(again.map((r) => r.text)).toEqual(again.map(() => replies[0]!.text));
        expect(Number(await server.client().get(`${id}:runs`))).toBe(1);
      }
    } finally {
      await Promise.all(fleet.map(({ child }) => child.exit()));
    }
  }, 300_000);
});
