/**
 * Background refresh of `@Cached` routes in real Nest apps, on both platforms, over real HTTP:
 * inside a stale window every request is answered with the stale value at once, and one
 * refresh runs the route (guards included) for a request reconstructed from the URL.
 */
import 'reflect-metadata';
import { CanActivate, Controller, Get, Headers, Injectable, Module, UseGuards, type ExecutionContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { Cached, DogpileModule } from '../src/nest/index.js';
import { splitModuleOptions } from '../src/nest/options.js';
import { sleep } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';

type Seen = Record<string, string | string[] | undefined>;

/** What the handlers saw, per test app. */
interface Record_ {
  runs: number;
  seen: Seen[];
  order: string[];
  release?: () => void;
  gate?: Promise<void>;
}

function refreshEnded(cache: DogpileCache): Promise<string> {
  return new Promise((resolve) => {
    const listener = (info: { phase: string; outcome?: string }) => {
      if (info.phase !== 'end') return;
      cache.off('refresh', listener);
      resolve(info.outcome ?? '');
    };
    cache.on('refresh', listener);
  });
}

async function start(platform: 'express' | 'fastify', cache: DogpileCache, record: Record_) {
  @Injectable()
  class KeyGuard implements CanActivate {
    canActivate(context: ExecutionContext): boolean {
      return context.switchToHttp().getRequest<{ headers: Seen }>().headers['x-api-key'] === 'k';
    }
  }

  @Controller()
  class RefreshController {
    @Get('r')
    @Cached({ ttl: 300, staleWhileRevalidate: '30s' })
    async r(@Headers() headers: Seen): Promise<{ run: number }> {
      const run = ++record.runs;
      record.seen.push({ ...headers });
      if (run === 2 && record.gate) await Promise.race([record.gate, sleep(5000)]);
      if (run === 2) record.order.push('refresh ended');
      return { run };
    }

    @Get('guarded')
    @UseGuards(KeyGuard)
    @Cached({ ttl: 300, staleWhileRevalidate: '30s' })
    guarded(): { run: number } {
      return { run: ++record.runs };
    }
  }

  @Module({ imports: [DogpileModule.forRoot({ cache })], controllers: [RefreshController], providers: [KeyGuard] })
  class AppModule {}

  const app = await NestFactory.create(AppModule, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), { logger: false });
  await app.listen(0, '127.0.0.1');
  return { port: (app.getHttpServer().address() as { port: number }).port, close: () => app.close() };
}

describe.each(['express', 'fastify'] as const)('Nest on %s: background refresh', (platform) => {
  it('every request inside the stale window is answered STALE before the background run ends; the run sees only the replayed headers', async () => {
    const cache = createCache();
    const record: Record_ = { runs: 0, seen: [], order: [] };
    record.gate = new Promise<void>((resolve) => {
      record.release = resolve;
    });
    const app = await start(platform, cache, record);
    try {
      const live = { 'x-forwarded-for': '203.0.113.9', 'x-request-id': 'abc' };
      expect((await fetchReply(app.port, '/r', { headers: live })).headers['x-cache']).toBe('MISS');
      await sleep(400);
      const ended = refreshEnded(cache);
      const burst = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const reply = await fetchReply(app.port, '/r', { headers: { 'x-request-id': 'abc', 'x-forwarded-for': '203.0.113.9' } });
          record.order.push('reply');
          return reply;
        }),
      );
      record.release!();
      expect(await ended).toBe('stored');
      expect(burst.map((r) => [r.headers['x-cache'], r.text])).toEqual(Array(6).fill(['STALE', '{"run":1}']));
      expect(record.order).toEqual([...Array(6).fill('reply'), 'refresh ended']);
      const replayed = record.seen[1]!;
      expect(Object.keys(replayed).filter((name) => replayed[name] !== undefined).sort()).toEqual(['host']);
      const after = await fetchReply(app.port, '/r');
      expect([after.headers['x-cache'], after.text]).toEqual(['HIT', '{"run":2}']);
    } finally {
      record.release?.();
      await app.close();
    }
  });

  it('a guard that refuses the reconstructed request stores nothing: the next request runs the handler', async () => {
    const cache = createCache();
    const record: Record_ = { runs: 0, seen: [], order: [] };
    const app = await start(platform, cache, record);
    const key = { 'x-api-key': 'k' };
    try {
      expect((await fetchReply(app.port, '/guarded', { headers: key })).text).toBe('{"run":1}');
      await sleep(400);
      const ended = refreshEnded(cache);
      expect((await fetchReply(app.port, '/guarded', { headers: key })).headers['x-cache']).toBe('STALE');
      await ended;
      expect(record.runs).toBe(1);
      const next = await fetchReply(app.port, '/guarded', { headers: key });
      expect([next.headers['x-cache'], next.text]).toEqual(['MISS', '{"run":2}']);
    } finally {
      await app.close();
    }
  });
});

it('the module options refuse a bad refresh or replayHeaders (InvalidOptionError naming it)', () => {
  const optionOf = (options: object): string | undefined => {
    try {
      splitModuleOptions(options);
    } catch (error) {
      if (error instanceof InvalidOptionError) return error.option;
      throw error;
    }
    return undefined;
  };
  expect(optionOf({ refresh: 'soon' })).toBe('refresh');
  expect(optionOf({ replayHeaders: 'x-tenant' })).toBe('replayHeaders');
  expect(optionOf({ refresh: 'foreground', replayHeaders: ['x-tenant'] })).toBeUndefined();
});
