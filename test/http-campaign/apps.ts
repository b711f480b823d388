/**
 * The campaign's apps: one per adapter, each a pure function of what its framework hands the
 * handler. A handler echoes the method, the target and path as the framework parsed them, the
 * query as the app reads it, the `Host` and `X-Forwarded-Host` it saw (the guard keys both),
 * and a link built from them; a route that says `Vary: Accept-Language` also echoes that
 * field. Nothing in a body counts runs or reads a clock, so the same request always gets the
 * same answer: any difference between the guarded app and the bare one is the guard's.
 *
 * Three readings follow what the docs allow a shared cache to assume: the app reads the query
 * as names mapped to lists of values, so the order of parameters with different names does
 * not matter to it (the target is echoed with its parameters in order of their raw names, the
 * query with its decoded names in order; values of one decoded name keep their order); the `Host` is read
 * case-insensitively (RFC 9110 §4.2.3; the key holds it lower-case), and a HEAD is rendered
 * as the GET it stands for (RFC 9110 §9.3.2: the same fields as a GET), so the body names the
 * method GET. `headAware` apps name HEAD as HEAD instead (an app that treats HEAD on its own).
 *
 * The route is chosen by the path the framework parsed, first segment first:
 *   /secret, /e/private  SECRET (the routes a resolved dot segment would reach)
 *   /vary/..             Vary: Accept-Language, the field echoed
 *   /val/..              ETag + Last-Modified
 *   /cookie/..           Set-Cookie
 *   /private/..          Cache-Control: private
 *   /nostore/..          Cache-Control: no-store
 *   /targeted/..         Dogpile-Cache-Control (read by the guard only)
 *   /stream/..           the body in three chunks, one per turn of the event loop
 *   /broken/..           the first third of the body, then the body fails (the connection is cut)
 *   anything else        the catch-all
 *
 * The catch-all (SECRET included), /val/ and /stream/ tag their responses `campaign`
 * (`Dogpile-Tags`, read by the guard only), which the campaign invalidates.
 *
 * A guarded app records every handler run (`runLog`): the target and the header fields the
 * handler saw.
 */
import { appendFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { Readable } from 'node:stream';
import { serve, type ServerType } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { dogpileGuard as expressGuard } from '../../src/express/index.js';
import { dogpileGuardPlugin } from '../../src/fastify/index.js';
import { withDogpile } from '../../src/fetch/index.js';
import { dogpileGuard as honoGuard } from '../../src/hono/index.js';
import { dogpileGuard as koaGuard } from '../../src/koa/index.js';
import { createCache, type DogpileCache } from '../../src/index.js';

export const ADAPTERS = ['express', 'fastify', 'koa', 'hono', 'fetch', 'nest-express', 'nest-fastify'] as const;
export type Adapter = (typeof ADAPTERS)[number];

/** The guard's options in every guarded app: fresh 300 ms, then stale 1.5 s, then gone; refreshed in the background. */
export const GUARD = { ttl: 300, staleWhileRevalidate: 1500 } as const;

/** What one handler run saw. */
export interface Seen {
  method: string;
  /** The request target as the framework gives it (Hono/fetch: request.url). */
  target: string;
  /** The path the framework routes on. */
  path: string;
  query: unknown;
  host: string | undefined;
  xfh: string | undefined;
  acceptLanguage: string | undefined;
  credentials: boolean;
  /** The link the app builds from the origin it sees. */
  link: string;
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  /** The body, in the chunks the app writes it in. */
  chunks: string[];
  /** The body fails after its chunks (the connection is cut). */
  broken?: true;
}

/** One handler run of a guarded app, as recorded in the run log. */
export interface Run {
  adapter: Adapter;
  pid: number;
  /** When the handler started (`now()`: comparable across the machine's processes). */
  at: number;
  method: string;
  /** The target as the framework hands it (a web adapter: the URL). */
  target: string;
  /** Every header field the handler saw, names lower-case (repeated ones joined). */
  headers: Record<string, string>;
  /** Whether the request was not a client's: every client request of the campaign says `Connection: close`, a background refresh carries no such field. */
  refresh: boolean;
}

/** Where a guarded app process appends its handler runs, one JSON line each (set by server.ts). */
export const runLog: { file: string | undefined } = { file: undefined };

export function recordRun(run: Omit<Run, 'pid' | 'at' | 'refresh'>): void {
  if (runLog.file === undefined) return;
  const refresh = run.headers.connection === undefined;
  appendFileSync(runLog.file, `${JSON.stringify({ ...run, refresh, pid: process.pid, at: performance.timeOrigin + performance.now() })}\n`);
}

function nodeHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)]));
}

/** Records a Node adapter's handler run (a guarded app only). */
export function recordNodeRun(adapter: Adapter, req: http.IncomingMessage, target: string, guarded: boolean): void {
  if (guarded) recordRun({ adapter, method: req.method ?? '', target, headers: nodeHeaders(req.headers) });
}

/** The routes whose responses carry the tag the campaign invalidates. */
export const TAGGED_ROUTES: readonly string[] = ['catch-all', 'SECRET', 'val', 'stream'];
export const TAG = 'campaign';

export const VALIDATORS = { etag: '"v1"', lastModified: 'Wed, 01 Jan 2025 00:00:00 GMT' } as const;

export function routeOf(path: string): string {
  if (path === '/secret' || path === '/e/private') return 'SECRET';
  const first = /^\/([a-z]+)\//.exec(path)?.[1];
  return first !== undefined && ['vary', 'val', 'cookie', 'private', 'nostore', 'targeted', 'stream', 'broken'].includes(first) ? first : 'catch-all';
}

/** The app's answer: a pure function of what the handler saw. */
export function answer(seen: Seen): Answer {
  const route = routeOf(seen.path);
  const { acceptLanguage, ...echo } = seen;
  const body = JSON.stringify({ route, ...echo, ...(route === 'vary' ? { acceptLanguage: acceptLanguage ?? null } : {}) });
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  let chunks = [body];
  if (TAGGED_ROUTES.includes(route)) headers['dogpile-tags'] = TAG;
  switch (route) {
    case 'vary':
      headers.vary = 'Accept-Language';
      break;
    case 'val':
      headers.etag = VALIDATORS.etag;
      headers['last-modified'] = VALIDATORS.lastModified;
      break;
    case 'cookie':
      headers['set-cookie'] = 'sid=1; Path=/';
      break;
    case 'private':
      headers['cache-control'] = 'private, max-age=60';
      break;
    case 'nostore':
      headers['cache-control'] = 'no-store';
      break;
    case 'targeted':
      headers['cache-control'] = 'public, max-age=0';
      headers['dogpile-cache-control'] = 'max-age=1';
      break;
    case 'stream': {
      const third = Math.ceil(body.length / 3);
      chunks = [body.slice(0, third), body.slice(third, 2 * third), body.slice(2 * third)];
      break;
    }
    case 'broken':
      return { status: 200, headers, chunks: [body.slice(0, Math.ceil(body.length / 3))], broken: true };
  }
  return { status: 200, headers, chunks };
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Parameters put in order of their (raw or decoded) names; one name's values keep their order. */
function byName<T>(params: T[], name: (p: T) => string): T[] {
  return params
    .map((p, i) => [p, i] as const)
    .sort(([a, i], [b, j]) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : i - j))
    .map(([p]) => p);
}

/** The target with its query parameters in order of their raw names. */
function targetByName(target: string): string {
  const q = target.indexOf('?');
  if (q === -1) return target;
  const params = byName(target.slice(q + 1).split('&'), (p) => p.split('=')[0]!);
  return `${target.slice(0, q)}?${params.join('&')}`;
}

/** A query object (Express, Fastify, Koa) with its names in order. */
function objectByName(query: unknown): unknown {
  if (query === null || typeof query !== 'object') return query;
  return Object.fromEntries(byName(Object.entries(query as Record<string, unknown>), ([k]) => k));
}

/** Whether a HEAD names itself in the body (set once per process, by server.ts). */
export const reading = { headAware: false };

function methodSeen(method: string): string {
  return method === 'HEAD' && !reading.headAware ? 'GET' : method;
}

export function nodeSeen(method: string, target: string, path: string, query: unknown, headers: http.IncomingHttpHeaders): Seen {
  const host = headers.host?.toLowerCase();
  return {
    method: methodSeen(method),
    target: targetByName(target),
    path,
    query: objectByName(query),
    host,
    xfh: header(headers['x-forwarded-host']),
    acceptLanguage: header(headers['accept-language']),
    credentials: headers.authorization !== undefined || headers.cookie !== undefined,
    link: `http://${host ?? ''}${path}`,
  };
}

export function webSeen(request: Request): Seen {
  const url = new URL(request.url);
  return {
    method: methodSeen(request.method),
    target: targetByName(request.url),
    path: url.pathname,
    query: byName([...url.searchParams], ([k]) => k),
    host: request.headers.get('host')?.toLowerCase(),
    xfh: request.headers.get('x-forwarded-host') ?? undefined,
    acceptLanguage: request.headers.get('accept-language') ?? undefined,
    credentials: request.headers.has('authorization') || request.headers.has('cookie'),
    link: `${url.origin}${url.pathname}`,
  };
}

function webResponse(a: Answer): Response {
  const headers = new Headers(a.headers);
  if (a.chunks.length === 1 && !a.broken) return new Response(a.chunks[0], { status: a.status, headers });
  const rest = [...a.chunks];
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((r) => setImmediate(r));
      const next = rest.shift();
      if (next !== undefined) controller.enqueue(new TextEncoder().encode(next));
      else if (a.broken) controller.error(new Error('the campaign body fails mid-stream'));
      else controller.close();
    },
  });
  return new Response(stream, { status: a.status, headers });
}

/** The body as a Node stream: one chunk per turn of the event loop, then the end or (broken) an error. */
export function nodeBody(a: Answer): Readable {
  const rest = [...a.chunks];
  return new Readable({
    read() {
      setImmediate(() => {
        const next = rest.shift();
        if (next !== undefined) this.push(next);
        else if (a.broken) this.destroy(new Error('the campaign body fails mid-stream'));
        else this.push(null);
      });
    },
  });
}

export interface RunningApp {
  port: number;
  close(): Promise<void>;
}

async function listen(server: http.Server | ServerType): Promise<number> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function closeServer(server: http.Server | ServerType): Promise<void> {
  (server as http.Server).closeAllConnections?.();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Starts `adapter`'s app on a free port: behind the guard with `cache`, or bare when `cache` is undefined. */
export async function startApp(adapter: Adapter, cache: DogpileCache | undefined): Promise<RunningApp> {
  const guard = cache === undefined ? undefined : { cache, ...GUARD };
  if (adapter === 'express') {
    const app = express();
    if (guard) app.use(expressGuard(guard));
    app.all(/.*/, (req, res) => {
      recordNodeRun(adapter, req, req.originalUrl, guard !== undefined);
      const a = answer(nodeSeen(req.method, req.originalUrl, req.path, req.query, req.headers));
      res.status(a.status).set(a.headers);
      const [first, ...rest] = a.chunks;
      if (a.broken) {
        res.write(first);
        setImmediate(() => res.destroy());
        return;
      }
      if (rest.length === 0) {
        res.send(first);
        return;
      }
      res.write(first);
      const next = () => {
        const chunk = rest.shift();
        if (rest.length === 0) res.end(chunk);
        else {
          res.write(chunk);
          setImmediate(next);
        }
      };
      setImmediate(next);
    });
    const server = http.createServer(app);
    const port = await listen(server);
    return { port, close: () => closeServer(server) };
  }
  if (adapter === 'fastify') {
    const app = Fastify();
    if (guard) await app.register(dogpileGuardPlugin, guard);
    app.all('/*', (request, reply) => {
      recordNodeRun(adapter, request.raw, request.url, guard !== undefined);
      const a = answer(nodeSeen(request.method, request.url, request.url.split('?')[0]!, request.query, request.headers));
      void reply.code(a.status).headers(a.headers);
      void reply.send(a.chunks.length === 1 && !a.broken ? a.chunks[0] : nodeBody(a));
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
  }
  if (adapter === 'koa') {
    const app = new Koa();
    if (guard) app.use(koaGuard(guard));
    app.use((ctx) => {
      recordNodeRun(adapter, ctx.req, ctx.originalUrl, guard !== undefined);
      const a = answer(nodeSeen(ctx.method, ctx.originalUrl, ctx.path, ctx.query, ctx.headers));
      ctx.status = a.status;
      ctx.set(a.headers);
      ctx.body = a.chunks.length === 1 && !a.broken ? a.chunks[0] : nodeBody(a);
    });
    const server = http.createServer(app.callback());
    const port = await listen(server);
    return { port, close: () => closeServer(server) };
  }
  if (adapter === 'nest-express' || adapter === 'nest-fastify') {
    // Loaded only when asked for (Nest and its platforms are large).
    const { startNestApp } = await import('./nest-apps.js');
    return startNestApp(adapter, cache);
  }
  const handler = (request: Request): Response => {
    if (guard) recordRun({ adapter, method: request.method, target: request.url, headers: Object.fromEntries(request.headers) });
    return webResponse(answer(webSeen(request)));
  };
  let fetch: (request: Request) => Response | Promise<Response>;
  if (adapter === 'hono') {
    const app = new Hono();
    if (guard) app.use(honoGuard({ ...guard, app }));
    app.all('*', (c) => handler(c.req.raw));
    fetch = app.fetch;
  } else {
    fetch = guard ? withDogpile(handler, guard) : handler;
  }
  const server = serve({ fetch, port: 0, hostname: '127.0.0.1' });
  const port = await listen(server);
  return { port, close: () => closeServer(server) };
}

/** Every adapter's app, guarded (one cache per adapter on `redisUrl`) or bare. */
export async function startApps(adapters: readonly Adapter[], redisUrl: string | undefined): Promise<{ ports: Record<string, number>; caches: Partial<Record<Adapter, DogpileCache>>; close(): Promise<void> }> {
  const caches: DogpileCache[] = [];
  const byAdapter: Partial<Record<Adapter, DogpileCache>> = {};
  const apps: RunningApp[] = [];
  const ports: Record<string, number> = {};
  for (const adapter of adapters) {
    const cache = redisUrl === undefined ? undefined : createCache({ redis: redisUrl, prefix: `http-campaign-${adapter}` });
    if (cache) {
      caches.push(cache);
      byAdapter[adapter] = cache;
    }
    const app = await startApp(adapter, cache);
    apps.push(app);
    ports[adapter] = app.port;
  }
  return {
    ports,
    caches: byAdapter,
    close: async () => {
      await Promise.all(apps.map((a) => a.close()));
      await Promise.all(caches.map((c) => c.close()));
    },
  };
}
