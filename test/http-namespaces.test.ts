/**
 * `namespace` on the HTTP adapters (one option of every adapter: checked here on Express and
 * Fastify) and on `@Cached` (Nest, both platforms): the responses live in that namespace of the
 * cache, so its `clear()` drops exactly them, in every process sharing the Redis, while the
 * cache's other entries stay. A bad name is refused naming `namespace`.
 */
import 'reflect-metadata';
import { Controller, Get, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { dogpileGuard } from '../src/express/index.js';
import { dogpileGuardPlugin } from '../src/fastify/index.js';
import { createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { Cached, DogpileModule } from '../src/nest/index.js';
import { freshId } from '../tools/basics.js';
import { fetchReply } from '../tools/http-client.js';
import { useRedis } from './support/use-redis.js';

const server = useRedis();

async function expressApp(cache: DogpileCache, namespace: string, runs: { n: number }) {
  const app = express();
  app.get('/plain', dogpileGuard({ cache, ttl: '1m' }), (_req, res) => {
    res.send(`plain ${++runs.n}`);
  });
  app.get('/page', dogpileGuard({ cache, ttl: '1m', namespace }), (_req, res) => {
    res.send(`page ${++runs.n}`);
  });
  const listening = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => listening.once('listening', resolve));
  return { port: (listening.address() as AddressInfo).port, close: () => new Promise((resolve) => listening.close(resolve)) };
}

async function fastifyApp(cache: DogpileCache, namespace: string, runs: { n: number }) {
  const app = Fastify();
  await app.register(dogpileGuardPlugin, { cache, ttl: '1m', namespace });
  app.get('/page', async () => `page ${++runs.n}`);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
}

describe('namespace on the HTTP adapters', () => {
  it('Express: responses live in the namespace; its clear() (from another cache on the Redis) drops them, not the others', async () => {
    const prefix = freshId('http-ns');
    const cache = createCache({ redis: server.client(), prefix });
    const other = createCache({ redis: server.client(), prefix });
    const runs = { n: 0 };
    const app = await expressApp(cache, 'pages', runs);
    try {
      const first = await fetchReply(app.port, '/page');
      const plain = await fetchReply(app.port, '/plain');
      expect((await fetchReply(app.port, '/page')).text).toBe(first.text);
      expect((await fetchReply(app.port, '/page')).xCache).toBe('HIT');
      await other.namespace('pages').clear();
      const after = await fetchReply(app.port, '/page');
      expect(after.xCache).toBe('MISS');
      expect(after.text).not.toBe(first.text);
      // The cache's own entries stay.
      const plainAgain = await fetchReply(app.port, '/plain');
      expect(plainAgain.xCache).toBe('HIT');
      expect(plainAgain.text).toBe(plain.text);
    } finally {
      await app.close();
      await Promise.all([cache.close(), other.close()]);
    }
  });

  it('Fastify: the plugin stores in its namespace', async () => {
    const cache = createCache();
    const runs = { n: 0 };
    const app = await fastifyApp(cache, 'api', runs);
    try {
      const first = await fetchReply(app.port, '/page');
      expect((await fetchReply(app.port, '/page')).xCache).toBe('HIT');
      await cache.clear(); // the cache and every namespace inside it
      const after = await fetchReply(app.port, '/page');
      expect(after.xCache).toBe('MISS');
      expect(after.text).not.toBe(first.text);
      expect((await fetchReply(app.port, '/page')).xCache).toBe('HIT');
      await cache.namespace('other').clear(); // another namespace: nothing of this one
      expect((await fetchReply(app.port, '/page')).xCache).toBe('HIT');
    } finally {
      await app.close();
      await cache.close();
    }
  });

  it('refuses a bad namespace naming it', () => {
    for (const bad of ['', 'a/b', '{x}', 7]) {
      expect(() => dogpileGuard({ namespace: bad as string })).toThrow(InvalidOptionError);
      try {
        dogpileGuard({ namespace: bad as string });
      } catch (error) {
        expect((error as InvalidOptionError).option).toBe('namespace');
      }
    }
  });
});

describe.each(['express', 'fastify'] as const)('@Cached({ namespace }) on Nest (%s)', (platform) => {
  it("keeps a handler's values in its namespace: that namespace's clear() drops them, the other routes' stay", async () => {
    const cache = createCache();
    let runs = 0;

    @Controller()
    class PagesController {
      @Get('in')
      @Cached({ ttl: '1m', namespace: 'users' })
      inside(): { run: number } {
        return { run: ++runs };
      }

      @Get('out')
      @Cached('1m')
      outside(): { run: number } {
        return { run: ++runs };
      }
    }

    @Module({ imports: [DogpileModule.forRoot({ cache })], controllers: [PagesController] })
    class AppModule {}

    const app = await NestFactory.create(AppModule, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    const port = (app.getHttpServer().address() as AddressInfo).port;
    try {
      const first = await fetchReply(port, '/in');
      const out = await fetchReply(port, '/out');
      expect((await fetchReply(port, '/in')).text).toBe(first.text);
      await cache.namespace('users').clear();
      expect((await fetchReply(port, '/in')).text).not.toBe(first.text);
      expect((await fetchReply(port, '/out')).text).toBe(out.text);
    } finally {
      await app.close();
      await cache.close();
    }
  });

  it('refuses a bad namespace when the decorator is applied', () => {
    expect(() => Cached({ ttl: '1m', namespace: 'a/b' })).toThrow(InvalidOptionError);
  });
});
