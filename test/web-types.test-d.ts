import { Hono, type Context, type Input } from 'hono';
import Koa from 'koa';
import { expectTypeOf, test } from 'vitest';
import { withDogpile, type WithDogpileOptions } from '../src/fetch/index.js';
import { dogpileGuard as honoGuard, type DogpileGuardOptions as HonoOptions } from '../src/hono/index.js';
import { dogpileGuard as koaGuard, type DogpileGuardOptions as KoaOptions } from '../src/koa/index.js';

test('withDogpile keeps the handler\'s shape, extra arguments included', () => {
  const handler = async (_request: Request, ctx: { params: Promise<{ id: string }> }) => new Response((await ctx.params).id);
  const wrapped = withDogpile(handler, { ttl: '30s', key: (request) => new URL(request.url).pathname });
  expectTypeOf(wrapped).parameters.toEqualTypeOf<[Request, { params: Promise<{ id: string }> }]>();
  expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<Response>>();
  expectTypeOf<NonNullable<WithDogpileOptions['skip']>>().parameter(0).toEqualTypeOf<Request>();
  const plain = withDogpile((request: Request) => new Response(request.url));
  expectTypeOf(plain).parameters.toEqualTypeOf<[Request]>();
  // @ts-expect-error not a duration
  withDogpile(handler, { ttl: 'soon' });
});

test('the Hono middleware is typed for the app\'s generics', () => {
  type AppEnv = { Variables: { user: string } };
  const app = new Hono<AppEnv>();
  app.use(
    honoGuard<AppEnv>({
      skip: (c) => {
        expectTypeOf(c.get('user')).toEqualTypeOf<string>();
        return c.get('user') === 'admin';
      },
      tags: (c) => [`path:${c.req.path}`],
    }),
  );
  app.get('/items/:id', honoGuard<AppEnv, '/items/:id'>({ key: (c) => `item:${c.req.param('id')}` }), (c) => c.text(c.req.param('id')));
  expectTypeOf<NonNullable<HonoOptions<AppEnv>['key']>>().parameter(0).toEqualTypeOf<Context<AppEnv, string, Input>>();
});

test('the Koa middleware takes Koa\'s context', () => {
  const app = new Koa();
  app.use(koaGuard({ ttl: 1000, skip: (ctx) => ctx.path === '/health' }));
  expectTypeOf<NonNullable<KoaOptions['skip']>>().parameter(0).toEqualTypeOf<Koa.Context>();
});
