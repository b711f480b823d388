/**
 * Child process of `bench/http-refresh.bench.ts`: one Express or Fastify app.
 *
 *   node --import tsx bench/http-refresh-worker.ts <contender> <redis url> <handler ms>
 *
 * Contenders:
 *
 * - `cliff-background`, `cliff-foreground`: Express 5 + `dogpileGuard({ cache, ttl: '1s',
 *   staleWhileRevalidate: '1m', refresh })` on `createCache({ redis: url })`, for the HTTP expiry
 *   cliff. `GET /item/:id` takes <handler ms> (a timer) and counts its runs: those for a client
 *   request (which carries `x-bench-client`) and the others (a background refresh runs the
 *   route with a request reconstructed from the stored response, without that field).
 * - `express-bytes`, `fastify-bytes`: no cache; `GET /hit` sends a ~1 KB JSON body prepared
 *   once, the body a cache hit sends, the way the framework sends bytes. `express-same`,
 *   `fastify-same` also send the header fields of a hit; `express-map`: a middleware
 *   answering from a `Map` with those bytes. `fastify-fields-<letters>`: the same bytes, each
 *   field set with its own `reply.header` as a hit sets them; C adds `reply.code(200)`, D a
 *   `date` of its own (a stored response's, where the same-bytes route lets Node write the
 *   date), L `content-length` (which Fastify computes otherwise).
 * - `shape-<letters>`, `fastify-map`: the Fastify route in the shape the plugin gives a cached
 *   route, without a cache (see `bench/fastify-hooks.bench.ts`); `fastify-map` answers from a
 *   `Map` the way the plugin sends a hit.
 * - `express-dogpile`, `fastify-dogpile` (in-process cache), `…-dogpile-redis` (the cache on
 *   the given Redis), `…-dogpile-redis-l1` (on Redis with `l1`): `GET /hit` cached (ttl 60 s),
 *   its handler builds the same JSON per call.
 * - Any `express-…` contender with `-np` at the end: the same app with `x-powered-by`
 *   disabled, so that nothing has set a header field before the route (Express sets that one
 *   on every response otherwise).
 *
 * Also `GET /ping` and `GET /cpu` (never cached; the CPU time this process has used in µs,
 * and the handler runs so far). Prints `listening <port>`; closes everything and exits when
 * stdin ends.
 */
import { listenNode, listenUntilStdinEnds } from './lib/app-process.js';
import type { AddressInfo } from 'node:net';
import express, { type RequestHandler } from 'express';
import Fastify from 'fastify';
import { createCache, type DogpileCache } from '../src/index.js';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { dropTargetedFieldsOnWrite } from '../src/http/rules/targeted-fields.js';
import { servedInstructions } from '../src/http/pipeline.js';
import type { PreparedResponse } from '../src/http/flow/serve.js';

const [named, redisUrl, handlerMs] = process.argv.slice(2);
if (!named || !redisUrl || !handlerMs) throw new Error('usage: http-refresh-worker.ts <contender> <redis url> <handler ms>');
/** An Express contender named with `-np` at the end: the same app with `app.disable('x-powered-by')`. */
const noPoweredBy = named.startsWith('express-') && named.endsWith('-np');
const contender = noPoweredBy ? named.slice(0, -'-np'.length) : named;
const HANDLER_MS = Number(handlerMs);
const HIT_TTL_MS = 60_000;

/** The /hit payload: a small product list, ~1 KB of JSON, built on every call as a real handler would. */
function catalogue() {
  return {
    page: 1,
    items: Array.from({ length: 14 }, (_, i) => ({ id: i + 1, name: `product ${i + 1}`, price: 1000 + i * 75, currency: 'EUR', tags: ['a', 'b'] })),
  };
}
const catalogueBytes = Buffer.from(JSON.stringify(catalogue()));
const JSON_TYPE = 'application/json; charset=utf-8';
/** The header fields a hit sends besides the stored ones (`content-type`, `etag`...) and `Content-Length`. */
const HIT_FIELDS = { 'x-cache': 'HIT', age: '0', 'cache-status': 'dogpile-guard; hit; ttl=59' };

/** Handler runs: for a client's request (`x-bench-client`) and for any other (a background refresh). */
const runs = { client: 0, other: 0 };
const countRun = (headers: Record<string, unknown>) => {
  if (headers['x-bench-client'] !== undefined) runs.client++;
  else runs.other++;
};

let cache: DogpileCache | undefined;
if (contender.startsWith('cliff-')) cache = createCache({ redis: redisUrl, prefix: `bench-refresh-${contender}` });
else if (contender.includes('dogpile')) {
  cache = contender.includes('redis') ? createCache({ redis: redisUrl, prefix: `bench-refresh-${contender}`, l1: contender.endsWith('-l1') }) : createCache();
}

const cpu = () => {
  const { user, system } = process.cpuUsage();
  return { micros: user + system, user, system, runs };
};

let close: () => Promise<void>;
let port: number;

/** Adds `GET /ping` and `GET /cpu` (never cached) to a Fastify app and starts it on a free loopback port. */
async function listenFastify(app: import('fastify').FastifyInstance): Promise<{ port: number; close: () => Promise<void> }> {
  app.get('/ping', { config: { dogpile: false } }, async () => 'pong');
  app.get('/cpu', { config: { dogpile: false } }, async () => cpu());
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
}

if (contender.startsWith('cliff-') || contender.startsWith('express-')) {
  const app = express();
  if (noPoweredBy) app.disable('x-powered-by');
  if (contender.startsWith('cliff-')) {
    const refresh = contender === 'cliff-foreground' ? 'foreground' : 'background';
    const guard = dogpileGuard({ cache, ttl: '1s', staleWhileRevalidate: '1m', refresh });
    app.get('/item/:id', guard, async (req, res) => {
      countRun(req.headers);
      await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
      res.json({ id: req.params.id, name: `product ${req.params.id}`, price: 1999, computedAt: Date.now() });
    });
  } else if (contender === 'express-bytes' || contender === 'express-same') {
    const fields = contender === 'express-same' ? HIT_FIELDS : {};
    app.get('/hit', (req, res) => {
      countRun(req.headers);
      res.set({ 'content-type': JSON_TYPE, ...fields }).send(catalogueBytes);
    });
  } else if (contender === 'express-map') {
    // A middleware answering from a Map with the bytes and header fields of a hit: no cache.
    const prepared = new Map([['/hit', catalogueBytes]]);
    const headers = { 'content-type': JSON_TYPE, 'content-length': String(catalogueBytes.length), ...HIT_FIELDS };
    app.use((req, res, next) => {
      const body = prepared.get(req.path);
      if (body === undefined) return next();
      res.set(headers).end(body);
    });
  } else {
    const guard: RequestHandler = dogpileGuard({ cache, ttl: HIT_TTL_MS });
    app.get('/hit', guard, (req, res) => {
      countRun(req.headers);
      res.json(catalogue());
    });
  }
  app.get('/ping', (_req, res) => {
    res.send('pong');
  });
  app.get('/cpu', (_req, res) => {
    res.json(cpu());
  });
  ({ port, close } = await listenNode(app.listen(0, '127.0.0.1')));
} else if (contender.startsWith('shape-')) {
  // A bare Fastify route in the shape the plugin gives a cached route, without a cache: the
  // hooks named by the letters after `shape-` (R: an app-wide onRequest hook that wraps
  // writeHead; O: an app-wide onSend hook; S: a route onSend hook; P: a handler that answers
  // from a promise, sending through `reply` with the headers of a hit).
  const flags = contender.slice('shape-'.length);
  const app = Fastify({ logger: false });
  if (flags.includes('R')) {
    app.addHook('onRequest', (_request, reply, done) => {
      const res = reply.raw;
      const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => unknown;
      (res as unknown as { writeHead: (...args: unknown[]) => unknown }).writeHead = (...args: unknown[]) => writeHead(...args);
      done();
    });
  }
  if (flags.includes('O')) app.addHook('onSend', (_request, _reply, payload, done) => done(null, payload));
  const hitHeaders = { 'content-type': JSON_TYPE, 'x-cache': 'HIT', age: '0', 'cache-status': 'dogpile-guard; hit; ttl=599' };
  const send = (reply: import('fastify').FastifyReply): void => {
    void reply.code(200).headers({ ...hitHeaders, date: new Date().toUTCString() });
    void reply.send(catalogueBytes);
  };
  const onSend = (_request: unknown, _reply: unknown, payload: unknown, done: (error: null, payload: unknown) => void) => done(null, payload);
  app.get('/hit', flags.includes('S') ? { onSend: [onSend] } : {}, (req, reply) => {
    countRun(req.headers);
    if (!flags.includes('P')) return send(reply), reply;
    return new Promise((resolve) => {
      void Promise.resolve().then(() => {
        send(reply);
        resolve(reply.sent ? undefined : reply);
      });
    });
  });
  ({ port, close } = await listenFastify(app));
} else if (contender === 'fastify-map') {
  // The plugin's hooks and its way of sending a hit, without the cache: the writeHead wrap that
  // drops `Dogpile-*` fields, pass-through app-wide and route onSend hooks, and a handler that
  // answers from a promise with a prepared hit taken from a Map, applied as the plugin applies
  // it (`servedInstructions`). A real hit costs this plus `guard.plan` and `guard.handle`.
  const app = Fastify({ logger: false });
  const hits = new Map<string, PreparedResponse>([
    [
      '/hit',
      {
        status: 200,
        headers: [['content-type', JSON_TYPE], ['date', new Date().toUTCString()], ['content-length', String(catalogueBytes.length)]],
        headerObject: { 'content-type': JSON_TYPE, date: new Date().toUTCString(), 'content-length': String(catalogueBytes.length) },
        xCache: 'HIT',
        age: 0,
        cacheStatus: 'dogpile-guard; hit; ttl=59',
        body: catalogueBytes,
      },
    ],
  ]);
  app.addHook('onRequest', (request, reply, done) => {
    if (request.raw.headers['dogpile-replay'] === undefined) dropTargetedFieldsOnWrite(reply.raw);
    done();
  });
  app.addHook('onSend', (_request, _reply, payload, done) => done(null, payload));
  const onSend = (_request: unknown, _reply: unknown, payload: unknown, done: (error: null, payload: unknown) => void) => done(null, payload);
  app.get('/hit', { onSend: [onSend] }, (req, reply) => {
    countRun(req.headers);
    return new Promise((resolve) => {
      void Promise.resolve(hits.get(req.url)).then((response) => {
        const served = servedInstructions(response!);
        void reply.code(served.status);
        for (const [name, value] of served.headers) void reply.header(name, value);
        reply.send(served.body);
        resolve(reply.sent ? undefined : reply);
      });
    });
  });
  ({ port, close } = await listenFastify(app));
} else if (contender.startsWith('fastify-')) {
  const app = Fastify({ logger: false });
  if (cache) await app.register(dogpileGuardPlugin, { cache, ttl: HIT_TTL_MS });
  if (contender.startsWith('fastify-fields-')) {
    // The same bytes set field by field as a hit sets them; letters: C `reply.code(200)`,
    // D a `date` of its own (a stored response's), L `content-length`.
    const letters = contender.slice('fastify-fields-'.length);
    const date = new Date().toUTCString();
    const length = String(catalogueBytes.length);
    const fields: Array<[string, string]> = [['content-type', JSON_TYPE]];
    if (letters.includes('D')) fields.push(['date', date]);
    if (letters.includes('L')) fields.push(['content-length', length]);
    fields.push(...Object.entries(HIT_FIELDS));
    const code = letters.includes('C');
    app.get('/hit', (req, reply) => {
      countRun(req.headers);
      if (code) void reply.code(200);
      for (const [name, value] of fields) void reply.header(name, value);
      reply.send(catalogueBytes);
    });
  } else if (contender === 'fastify-bytes' || contender === 'fastify-same') {
    const fields = contender === 'fastify-same' ? HIT_FIELDS : {};
    app.get('/hit', (req, reply) => {
      countRun(req.headers);
      void reply.headers({ 'content-type': JSON_TYPE, ...fields }).send(catalogueBytes);
    });
  } else {
    app.get('/hit', async (req) => {
      countRun(req.headers);
      return catalogue();
    });
  }
  ({ port, close } = await listenFastify(app));
} else {
  throw new Error(`unknown contender ${contender}`);
}

listenUntilStdinEnds(port, async () => {
  await close();
  await cache?.close();
});
