/**
 * Koa behind `dogpileGuard()` when the handler's body stream fails (an error after its first
 * chunk, or `fs.createReadStream` of a directory): the leader's connection ends as plain Koa
 * ends it, nothing is stored, the requests waiting for that response are released at once to
 * run their own handler, and their connections end too. Real app, real sockets; every request
 * is bounded by an idle timeout far below the cache's `waitTimeout`, so a hang (or a waiter
 * released only by `waitTimeout`) fails with "request timed out".
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import Koa from 'koa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCache, type DogpileCache } from '../src/index.js';
import { dogpileGuard } from '../src/koa/index.js';
import { request } from '../tools/http-client.js';

/** How long a socket may stay idle before the request counts as hung (the cache waits 60 s). */
const HUNG = 8_000;
const WAITERS = 3;

/** The outcome of one request: a complete reply, or how the connection ended without one. */
async function outcome(port: number, target: string): Promise<string> {
  try {
    const reply = await request(port, target, { timeoutMs: HUNG });
    return reply === undefined ? 'no reply' : `complete ${reply.status} ${reply.xCache ?? ''}`.trim();
  } catch (error) {
    return (error as Error).message === 'request timed out' ? 'hung' : 'ended';
  }
}

/** A stream that sends one chunk, then fails when `fail` resolves (destroying itself with an error, as streams do). */
function failingStream(fail: Promise<void>): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (sent) return;
      sent = true;
      this.push(Buffer.from('first chunk\n'));
      void fail.then(() => this.destroy(new Error('the source failed')));
    },
  });
}

describe('Koa: a body stream that fails', () => {
  let cache: DogpileCache;
  let server: import('node:http').Server;
  let port: number;
  const runs = new Map<string, number>();
  /** The errors that reached Koa's error path (`app.on('error')`), and the requests they came from. */
  const appErrors: string[] = [];
  const failedRequests = new Set<object>();
  let dir: string;
  /** Resolves once `n` requests wait for a leader (the `coalesced` event). */
  let coalesced = 0;
  let onCoalesced: (() => void) | undefined;
  const waitersQueued = (n: number): Promise<void> =>
    new Promise((resolve) => {
      onCoalesced = () => {
        if (coalesced >= n) resolve();
      };
      onCoalesced();
    });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'koa-dir-body-'));
    cache = createCache({ waitTimeout: 60_000 });
    cache.on('coalesced', () => {
      coalesced++;
      onCoalesced?.();
    });
    const app = new Koa();
    app.silent = true;
    app.on('error', (error: NodeJS.ErrnoException, ctx: Koa.Context) => {
      appErrors.push(error.code ?? error.message);
      failedRequests.add(ctx.req);
    });
    app.use(dogpileGuard({ cache, ttl: '30s' }));
    app.use(async (ctx) => {
      const route = ctx.path.slice(1);
      const run = (runs.get(ctx.originalUrl) ?? 0) + 1;
      runs.set(ctx.originalUrl, run);
      // The first run fails only once the others wait for it; theirs fail at once.
      const ready = run === 1 ? waitersQueued(WAITERS) : Promise.resolve();
      ctx.type = 'text/plain';
      if (route === 'after-first-chunk') ctx.body = failingStream(ready);
      else if (route === 'directory') {
        await ready;
        ctx.body = fs.createReadStream(dir);
      } else ctx.body = 'fine';
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await cache.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['an error after its first chunk', '/after-first-chunk?n=1', 'the source failed'],
    ['fs.createReadStream of a directory', '/directory?n=1', 'EISDIR'],
  ])('%s: the leader and every waiter see their connection end; waiters run their own handler; nothing is stored', async (_name, target, failure) => {
    coalesced = 0;
    appErrors.length = 0;
    failedRequests.clear();
    const leader = outcome(port, target);
    const waiters = Array.from({ length: WAITERS }, () => outcome(port, target));
    const results = await Promise.all([leader, ...waiters]);
    expect(results).toEqual(Array.from({ length: WAITERS + 1 }, () => 'ended'));
    // Every waiter was released to run its own handler (the response was shared with nobody).
    expect(coalesced).toBe(WAITERS);
    expect(runs.get(target)).toBe(WAITERS + 1);
    // The stream's own error reached Koa's error path, for the leader as for each waiter.
    expect([...new Set(appErrors)]).toEqual([failure]);
    expect(failedRequests.size).toBe(WAITERS + 1);
    // Not stored: the next request runs the handler again (and fails again, its connection ends).
    expect(await outcome(port, target)).toBe('ended');
    expect(runs.get(target)).toBe(WAITERS + 2);
  });

  it('a healthy stream on the same app is still stored and shared', async () => {
    const first = await request(port, '/fine?n=1', { timeoutMs: HUNG });
    const second = await request(port, '/fine?n=1', { timeoutMs: HUNG });
    expect([first?.text, first?.xCache, second?.text, second?.xCache]).toEqual(['fine', 'MISS', 'fine', 'HIT']);
    expect(runs.get('/fine?n=1')).toBe(1);
  });
});
