/**
 * The request and response a background refresh runs an app's route with (Express, Koa,
 * Fastify, Nest): made in-process, with no socket. The app sees the target byte for byte and
 * exactly the header fields given; status, header fields and body bytes come back whole, for
 * bodies written, ended, piped from a file (express.static, res.sendFile) or streamed; a response
 * the app destroys is a rejection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import express from 'express';
import Koa from 'koa';
import Fastify from 'fastify';
import { runSyntheticExchange } from '../src/http/exchange/synthetic-exchange.js';
import { expressReplay, injectTarget, isReplay, type ExpressLikeApp } from '../src/http/exchange/node-replay.js';
import type { HandlerResponse } from '../src/http/pipeline.js';

let dir: string;
const binary = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) % 256));

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'dogpile-synthetic-'));
  writeFileSync(path.join(dir, 'blob.bin'), binary);
  writeFileSync(path.join(dir, 'page.html'), '<p>static</p>');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function bodyOf(response: HandlerResponse): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of response.body as AsyncIterable<Uint8Array | string>) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

describe('the synthetic request', () => {
  it('carries the raw target byte for byte, the method, and exactly the header fields given (in order, repeated fields joined as Node joins them)', async () => {
    let seen: { url?: string; method?: string; headers?: unknown; rawHeaders?: string[]; httpVersion?: string; complete?: boolean; remoteAddress?: string } = {};
    const target = '//a/../b/%2e%2E/c?q=%zz&x=1&x=2#';
    const response = await runSyntheticExchange(
      (req, res) => {
        seen = { url: req.url, method: req.method, headers: { ...req.headers }, rawHeaders: req.rawHeaders, httpVersion: req.httpVersion, complete: req.complete, remoteAddress: req.socket.remoteAddress };
        res.end('ok');
      },
      { method: 'GET', url: target, headers: { host: 'shop.example', accept: 'text/html', 'x-list': ['a', 'b'], 'user-agent': undefined } },
    );
    expect(response.status).toBe(200);
    expect(seen).toEqual({
      url: target,
      method: 'GET',
      headers: { host: 'shop.example', accept: 'text/html', 'x-list': 'a, b' },
      rawHeaders: ['host', 'shop.example', 'accept', 'text/html', 'x-list', 'a', 'x-list', 'b'],
      httpVersion: '1.1',
      complete: true,
      remoteAddress: '127.0.0.1',
    });
  });

  it('has no body: reading it ends at once', async () => {
    const response = await runSyntheticExchange(
      (req, res) => {
        const parts: Buffer[] = [];
        req.on('data', (c: Buffer) => parts.push(c));
        req.on('end', () => res.end(`read ${Buffer.concat(parts).length} bytes`));
      },
      { method: 'GET', url: '/', headers: {} },
    );
    expect((await bodyOf(response)).toString()).toBe('read 0 bytes');
  });
});

describe('the synthetic response', () => {
  it('keeps the status, the fields set by setHeader, appendHeader and writeHead, and the body bytes of write and end', async () => {
    const response = await runSyntheticExchange(
      (_req, res) => {
        res.setHeader('x-set', '1');
        res.appendHeader('set-cookie', ['a=1', 'b=2']);
        res.writeHead(203, { 'content-type': 'application/octet-stream', 'x-head': 'h' });
        res.write(binary.subarray(0, 10));
        res.write('é', 'latin1');
        res.write('ü');
        res.end(binary.subarray(10), () => undefined);
      },
      { method: 'GET', url: '/', headers: {} },
    );
    expect(response.status).toBe(203);
    expect(response.headers).toEqual({ 'x-set': '1', 'set-cookie': ['a=1', 'b=2'], 'content-type': 'application/octet-stream', 'x-head': 'h' });
    expect(await bodyOf(response)).toEqual(Buffer.concat([binary.subarray(0, 10), Buffer.from('é', 'latin1'), Buffer.from('ü'), binary.subarray(10)]));
  });

  it('keeps the fields of writeHead given as a flat list, and a body piped in from a stream', async () => {
    const response = await runSyntheticExchange(
      (_req, res) => {
        res.writeHead(200, ['x-a', '1', 'x-b', '2']);
        Readable.from([binary.subarray(0, 40_000), binary.subarray(40_000)]).pipe(res);
      },
      { method: 'GET', url: '/', headers: {} },
    );
    expect(response.headers).toMatchObject({ 'x-a': '1', 'x-b': '2' });
    expect(await bodyOf(response)).toEqual(binary);
  });

  it('closes as a response of a server does once finished: the response and the request emit close', async () => {
    const events: string[] = [];
    let closed!: () => void;
    const bothClosed = new Promise<void>((resolve) => (closed = resolve));
    await runSyntheticExchange(
      (req, res) => {
        res.on('finish', () => events.push('res finish'));
        res.on('close', () => events.push('res close'));
        req.on('close', () => {
          events.push('req close');
          closed();
        });
        req.on('aborted', () => events.push('req aborted'));
        res.end();
      },
      { method: 'GET', url: '/', headers: {} },
    );
    await bothClosed;
    expect(events).toEqual(['res finish', 'res close', 'req close']);
  });

  it('rejects when the app destroys the response before it finished, and when the listener throws', async () => {
    await expect(
      runSyntheticExchange(
        (_req, res) => {
          res.write('partial');
          setImmediate(() => res.destroy(new Error('upstream went away')));
        },
        { method: 'GET', url: '/', headers: {} },
      ),
    ).rejects.toThrow('upstream went away');
    await expect(
      runSyntheticExchange(
        (req) => {
          setImmediate(() => req.socket.destroy());
        },
        { method: 'GET', url: '/', headers: {} },
      ),
    ).rejects.toThrow('the app closed the response before it finished');
    await expect(
      runSyntheticExchange(
        () => {
          throw new Error('listener broke');
        },
        { method: 'GET', url: '/', headers: {} },
      ),
    ).rejects.toThrow('listener broke');
  });
});

describe('apps on the synthetic exchange', () => {
  it('Express (expressReplay): middleware, res.send, express.static and res.sendFile, the request marked as a refresh', async () => {
    const app = express();
    let marked = false;
    app.use((req, _res, next) => {
      marked = isReplay(req);
      next();
    });
    app.use('/files', express.static(dir));
    app.get('/send-file', (_req, res) => res.sendFile(path.join(dir, 'blob.bin')));
    app.get('/json', (req, res) => res.set('x-seen-host', req.hostname).json({ url: req.originalUrl, ua: req.get('user-agent') ?? null }));
    const replay = expressReplay(app as unknown as ExpressLikeApp);

    const json = await replay({ method: 'GET', url: '/json?b=2&a=1', headers: { host: 'shop.example' } });
    expect(json.status).toBe(200);
    expect(JSON.parse((await bodyOf(json)).toString())).toEqual({ url: '/json?b=2&a=1', ua: null });
    expect(json.headers['x-seen-host']).toBe('shop.example');
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    expect(marked).toBe(true);

    const page = await replay({ method: 'GET', url: '/files/page.html', headers: { host: 'shop.example' } });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect((await bodyOf(page)).toString()).toBe('<p>static</p>');

    const file = await replay({ method: 'GET', url: '/send-file', headers: { host: 'shop.example' } });
    expect(file.status).toBe(200);
    expect(file.headers['content-length']).toBe(String(binary.length));
    expect(await bodyOf(file)).toEqual(binary);

    const conditional = await replay({ method: 'GET', url: '/files/page.html', headers: { host: 'shop.example', 'if-none-match': String(page.headers.etag) } });
    expect(conditional.status).toBe(304);

    const missing = await replay({ method: 'GET', url: '/files/nothing.html', headers: { host: 'shop.example' } });
    expect(missing.status).toBe(404);
  });

  it('Koa (its callback, as koaReplay runs it): a string body, a streamed body, and the raw target', async () => {
    const app = new Koa();
    app.use((ctx) => {
      if (ctx.path === '/stream') {
        ctx.type = 'application/octet-stream';
        ctx.body = Readable.from([binary.subarray(0, 1000), binary.subarray(1000)]);
      } else {
        ctx.set('x-url', ctx.url);
        ctx.body = `koa ${ctx.method} ${ctx.host}`;
      }
    });
    const listener = app.callback() as (req: IncomingMessage, res: ServerResponse) => void;
    const text = await injectTarget(listener, { method: 'GET', url: '/a//b?z=1&a', headers: { host: 'koa.example' } });
    expect(text.status).toBe(200);
    expect(text.headers['x-url']).toBe('/a//b?z=1&a');
    expect((await bodyOf(text)).toString()).toBe('koa GET koa.example');
    const stream = await injectTarget(listener, { method: 'GET', url: '/stream', headers: { host: 'koa.example' } });
    expect(await bodyOf(stream)).toEqual(binary);
  });

  it('Fastify (fastify.routing, as the plugin and Nest on Fastify run it): the route, its hooks, and the raw target', async () => {
    const fastify = Fastify();
    fastify.addHook('onSend', async (_request, reply, payload) => {
      reply.header('x-hook', 'ran');
      return payload;
    });
    fastify.get('/items/:id', async (request, reply) => {
      reply.header('cache-control', 'max-age=5');
      return { id: (request.params as { id: string }).id, url: request.url, ip: request.ip };
    });
    try {
      await fastify.ready();
      const response = await injectTarget((req, res) => fastify.routing(req, res), { method: 'GET', url: '/items/7?x=%20', headers: { host: 'fastify.example' } });
      expect(response.status).toBe(200);
      expect(response.headers['x-hook']).toBe('ran');
      expect(response.headers['cache-control']).toBe('max-age=5');
      expect(JSON.parse((await bodyOf(response)).toString())).toEqual({ id: '7', url: '/items/7?x=%20', ip: '127.0.0.1' });
      const missing = await injectTarget((req, res) => fastify.routing(req, res), { method: 'GET', url: '/nothing', headers: { host: 'fastify.example' } });
      expect(missing.status).toBe(404);
    } finally {
      await fastify.close();
    }
  });
});
