import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { expectTypeOf, test } from 'vitest';
import { dogpileGuard, type DogpileGuardOptions } from '../src/express/index.js';
import dogpileGuardPlugin, { type DogpileGuardPluginOptions, type DogpileRouteConfig } from '../src/fastify/index.js';

test('Express options and middleware types', () => {
  const app = express();
  app.use(dogpileGuard());
  app.use(dogpileGuard({ ttl: '30s', statuses: [200, 404], maxBodySize: 1024, key: (req) => req.path, skip: (req) => req.path === '/health' }));
  expectTypeOf<DogpileGuardOptions['key']>().parameter(0).toEqualTypeOf<express.Request>();
  app.use(dogpileGuard({ tags: (req) => [`product:${req.path}`] }));
  expectTypeOf<NonNullable<DogpileGuardOptions['tags']>>().parameter(0).toEqualTypeOf<express.Request>();
  // @ts-expect-error tags is a function of the request
  dogpileGuard({ tags: ['a'] });
  // @ts-expect-error not a duration
  dogpileGuard({ ttl: 'soon' });
});

test('Fastify plugin options and route config types', () => {
  const app = Fastify();
  void app.register(dogpileGuardPlugin, { ttl: 30_000, key: (req) => req.url, tags: (req) => [req.url] });
  expectTypeOf<DogpileGuardPluginOptions['skip']>().parameter(0).toEqualTypeOf<FastifyRequest>();
  app.get('/a', { config: { dogpile: { ttl: '5m' } } }, async () => 'a');
  app.get('/b', { config: { dogpile: false } }, async () => 'b');
  // @ts-expect-error not a duration
  app.get('/c', { config: { dogpile: { ttl: 'soon' } } }, async () => 'c');
  // @ts-expect-error true is not a setting
  app.get('/d', { config: { dogpile: true } }, async () => 'd');
  expectTypeOf<DogpileRouteConfig['ttl']>().toEqualTypeOf<import('../src/index.js').Duration>();
  app.get('/e', { config: { dogpile: { ttl: '5m', staleWhileRevalidate: '1m', earlyRefresh: { beta: 2 } } } }, async () => 'e');
});
