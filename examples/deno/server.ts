/**
 * `Deno.serve` + dogpile-guard: a `fetch` handler wrapped in `withDogpile()`. GET responses are
 * cached, and concurrent misses for one URL run the handler once — in this process, or across
 * every process (Deno, Node or Bun) sharing REDIS_URL. From the repository root:
 *
 *   deno run -A --sloppy-imports --config examples/deno/deno.json examples/deno/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 deno run -A --sloppy-imports --config examples/deno/deno.json examples/deno/server.ts
 */
import process from 'node:process';
import { Redis } from 'ioredis';
import { createCache } from 'dogpile-guard';
import { withDogpile } from 'dogpile-guard/fetch';

interface DenoServer {
  shutdown(): Promise<void>;
}
declare const Deno: {
  serve(options: { port: number; hostname: string; onListen(address: { port: number }): void }, handler: (request: Request) => Response | Promise<Response>): DenoServer;
};

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';

// With REDIS_URL: one cache for every process on that Redis. Without: in this process.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined;
redis?.on('error', (error) => console.error(`redis: ${error.message}`));
const cache = createCache({ redis });

// A slow "database": 200 ms per query, every query counted.
let dbQueries = 0;
async function findProduct(id: string) {
  dbQueries++;
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), pid: process.pid };
}

// The app: a plain fetch handler, cached for 30 s...
const products = withDogpile(
  async (request: Request) => {
    const id = decodeURIComponent(new URL(request.url).pathname.slice('/products/'.length));
    return Response.json(await findProduct(id));
  },
  { cache, ttl: '30s' },
);

// ...behind a router that sends only what should be cached through it.
const server = Deno.serve(
  {
    port,
    hostname: host,
    onListen({ port: actual }) {
      console.log(`listening on http://${host}:${actual} (cache: ${redis ? 'Redis' : 'in-process'})`);
      console.log(`try: curl -i http://${host}:${actual}/products/42`);
    },
  },
  (request) => {
    const { pathname } = new URL(request.url);
    if (pathname.startsWith('/products/')) return products(request);
    if (pathname === '/stats') return Response.json({ dbQueries, pid: process.pid });
    return new Response('not found', { status: 404 });
  },
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: closing`);
  await server.shutdown();
  await cache.close(); // closes only what the cache created; the Redis client is ours to close
  await redis?.quit();
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
