/**
 * `dogpile-guard/nest/cache-manager` in real NestJS 12 apps (Express and Fastify platforms), over
 * real HTTP and a real Redis: the apps of Nest's caching chapter run with only the import
 * changed (the same app is also run on `@nestjs/cache-manager` itself, as the reference), the
 * behaviour of `@nestjs/cache-manager`'s module, interceptor and decorators, the injected
 * cache's methods (in Redis and in memory), and the options refused by name. The cross-process
 * proofs are in nest-cache-manager-processes.test.ts.
 */
import 'reflect-metadata';
import type { Redis } from 'ioredis';
import { Controller, Get, Inject, Injectable, Module, Param, Post, UseInterceptors, type ExecutionContext, type DynamicModule, type INestApplication, type Type } from '@nestjs/common';
import { APP_INTERCEPTOR, NestFactory, Reflector } from '@nestjs/core';
import { firstValueFrom, of } from 'rxjs';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import * as nestjsCacheManager from '@nestjs/cache-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError, CacheClosedError, createCache, InvalidOptionError } from '../src/index.js';
import { Redis as IORedis } from 'ioredis';
import * as dogpileCacheManager from '../src/nest/cache-manager/index.js';
import { CACHE_MANAGER, CacheInterceptor, CacheKey, CacheModule, CacheTTL, type Cache } from '../src/nest/cache-manager/index.js';
import { cacheKeys } from '../src/store/key.js';
import { MAX_DURATION_MS } from '../src/shared/duration.js';
import { useRedis } from './support/use-redis.js';
import { RedisServer } from '../tools/redis-server.js';
import { freshId, sleep } from '../tools/basics.js';
import { get, json } from '../tools/http-client.js';

type Platform = 'express' | 'fastify';
type Lib = typeof dogpileCacheManager | typeof nestjsCacheManager;

const server = useRedis();
let redis: Redis;

beforeAll(() => {
  redis = server.client();
});

interface Running {
  app: INestApplication;
  port: number;
  close(): Promise<void>;
}

async function listen(module: Type<unknown>, platform: Platform): Promise<Running> {
  const app = await NestFactory.create(module, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as { port: number }).port;
  return { app, port, close: () => app.close() };
}

/** The app of Nest's caching chapter, written against `lib` (either package): only the import differs. */
function docsApp(lib: Lib, register: Record<string, unknown>, runs: Map<string, number>) {
  const { CacheModule: Module_, CACHE_MANAGER: TOKEN, CacheInterceptor: Interceptor, CacheKey: Key, CacheTTL: Ttl } = lib;
  const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1).get(name)!;

  @Injectable()
  class ProfileService {
    constructor(@Inject(TOKEN) private readonly cacheManager: nestjsCacheManager.Cache) {}
    async remember(id: string, name: string) {
      await this.cacheManager.set(`profile:${id}`, { id, name }, 10_000);
    }
    read(id: string) {
      return this.cacheManager.get<{ id: string; name: string }>(`profile:${id}`);
    }
    forget(id: string) {
      return this.cacheManager.del(`profile:${id}`);
    }
  }

  @Controller()
  @UseInterceptors(Interceptor)
  class AppController {
    constructor(@Inject(ProfileService) private readonly profiles: ProfileService) {}

    @Get('items')
    items() {
      return { items: ['a', 'b'], run: ran('items') };
    }

    @Get('custom')
    @Key('custom_key')
    @Ttl(20_000)
    custom() {
      return { run: ran('custom') };
    }

    @Post('items')
    create() {
      return { created: ran('post') };
    }

    @Get('profiles/:id/remember/:name')
    async rememberProfile(@Param('id') id: string, @Param('name') name: string) {
      await this.profiles.remember(id, name);
      return { ok: true };
    }
  }

  @Module({ imports: [Module_.register(register)], controllers: [AppController], providers: [ProfileService] })
  class AppModule {}
  return { AppModule, ProfileService };
}

/** The chapter's global binding: `APP_INTERCEPTOR` with `CacheInterceptor`, `isGlobal` module. */
function globalApp(lib: Lib, register: Record<string, unknown>, runs: Map<string, number>) {
  let secondRun: ((value: unknown) => void) | undefined;
  @Controller()
  class GlobalController {
    @Get('global/:id')
    async one(@Param('id') id: string) {
      const run = runs.set(id, (runs.get(id) ?? 0) + 1).get(id)!;
      // Held until a second run starts (or 1 s): requests that find the cache empty meanwhile run it too.
      if (run === 1) await Promise.race([new Promise((resolve) => (secondRun = resolve)), sleep(1000)]);
      if (run === 2) secondRun?.(undefined);
      return { id, run };
    }
  }
  @Module({
    imports: [lib.CacheModule.register({ ...register, isGlobal: true })],
    controllers: [GlobalController],
    providers: [{ provide: APP_INTERCEPTOR, useClass: lib.CacheInterceptor }],
  })
  class AppModule {}
  return AppModule;
}

const LIBS: [string, Lib, (prefix: string) => Record<string, unknown>][] = [
  ['@nestjs/cache-manager (the reference)', nestjsCacheManager, () => ({ ttl: 5000 })],
  ['dogpile-guard/nest/cache-manager', dogpileCacheManager, (prefix) => ({ ttl: 5000, redis: server.url, prefix })],
];

describe.each(['express', 'fastify'] as Platform[])('the caching chapter on %s', (platform) => {
  describe.each(LIBS)('with %s', (name, lib, options) => {
    const ours = lib === dogpileCacheManager;
    const runs = new Map<string, number>();
    let app: Running;
    let global: Running;
    const globalRuns = new Map<string, number>();
    const prefix = `ncm-docs-${platform}-${freshId()}`;

    beforeAll(async () => {
      app = await listen(docsApp(lib, options(prefix), runs).AppModule, platform);
      global = await listen(globalApp(lib, options(`${prefix}-g`), globalRuns), platform);
    });
    afterAll(async () => {
      await app?.close();
      await global?.close();
    });

    it('CacheInterceptor on a controller: the second GET is answered from the cache (X-Cache MISS then HIT)', async () => {
      const first = await get(app.port, '/items');
      const second = await get(app.port, '/items');
      expect(json(first)).toEqual({ items: ['a', 'b'], run: 1 });
      expect(second.text).toBe(first.text);
      expect([first.xCache, second.xCache]).toEqual(['MISS', 'HIT']);
      expect(runs.get('items')).toBe(1);
    });

    it('only GET is cached: a POST runs its handler every time', async () => {
      const a = await get(app.port, '/items', {}, 'POST');
      const b = await get(app.port, '/items', {}, 'POST');
      expect([json(a), json(b)]).toEqual([{ created: 1 }, { created: 2 }]);
    });

    it('@CacheKey and @CacheTTL: the value is stored under the key, readable through CACHE_MANAGER', async () => {
      const first = await get(app.port, '/custom');
      const second = await get(app.port, '/custom');
      expect(json(second)).toEqual(json(first));
      expect(runs.get('custom')).toBe(1);
      const cache = app.app.get<nestjsCacheManager.Cache>(lib.CACHE_MANAGER);
      expect(await cache.get('custom_key')).toEqual(json(first));
      if (ours) {
        const pttl = await redis.pttl(cacheKeys(prefix, 'custom_key').value);
        expect(pttl).toBeGreaterThan(15_000);
        expect(pttl).toBeLessThanOrEqual(20_000);
      }
    });

    it('@Inject(CACHE_MANAGER) in a service: set, get and del', async () => {
      await get(app.port, '/profiles/7/remember/ada');
      const cache = app.app.get<nestjsCacheManager.Cache>(lib.CACHE_MANAGER);
      expect(await cache.get('profile:7')).toEqual({ id: '7', name: 'ada' });
      expect(await cache.del('profile:7')).toBe(true);
      expect(await cache.get('profile:7')).toBeUndefined();
    });

    it('global binding through APP_INTERCEPTOR caches every GET route', async () => {
      const id = freshId();
      const replies = [await get(global.port, `/global/${id}`), await get(global.port, `/global/${id}`)];
      expect(replies.map((r) => r.xCache)).toEqual(['MISS', 'HIT']);
      expect(globalRuns.get(id)).toBe(1);
    });

    it('the interceptor coalesces 50 concurrent cold requests into one handler run', async () => {
      const id = freshId();
      const replies = await Promise.all(Array.from({ length: 50 }, () => get(global.port, `/global/${id}`)));
      expect(replies.every((r) => r.status === 200)).toBe(true);
      if (ours) {
        expect(globalRuns.get(id)).toBe(1);
        expect(new Set(replies.map((r) => r.text)).size).toBe(1);
        expect(replies.filter((r) => r.xCache === 'MISS')).toHaveLength(1);
      } else {
        // The reference runs the handler for every request that finds the cache empty.
        expect(globalRuns.get(id)).toBeGreaterThan(1);
      }
    });
  });
});

describe('CacheModule', () => {
  it('uses the same injection token as @nestjs/cache-manager: a provider injecting theirs receives this cache', async () => {
    expect(CACHE_MANAGER).toBe(nestjsCacheManager.CACHE_MANAGER);
    expect(dogpileCacheManager.CACHE_KEY_METADATA).toBe(nestjsCacheManager.CACHE_KEY_METADATA);
    expect(dogpileCacheManager.CACHE_TTL_METADATA).toBe(nestjsCacheManager.CACHE_TTL_METADATA);
    @Injectable()
    class Library {
      constructor(@Inject(nestjsCacheManager.CACHE_MANAGER) readonly cache: Cache) {}
    }
    @Module({ imports: [CacheModule.register()], providers: [Library] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      const lib = ctx.get(Library);
      expect(lib.cache).toBe(ctx.get(CACHE_MANAGER));
      expect(lib.cache).toBe(ctx.get(dogpileCacheManager.Cache));
      expect(await lib.cache.wrap('k', () => 'v', 1000)).toBe('v');
    } finally {
      await ctx.close();
    }
  });

  /** An app context with a provider that injects CACHE_MANAGER, from `imports`. */
  async function contextWith(imports: (DynamicModule | Type<unknown>)[]) {
    @Injectable()
    class Consumer {
      constructor(@Inject(CACHE_MANAGER) readonly cache: Cache) {}
    }
    @Module({ imports, providers: [Consumer] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    return { ctx, cache: ctx.get(Consumer).cache };
  }

  @Injectable()
  class ConfigService {
    readonly ttl = 4321;
    readonly prefix = `ncm-async-${freshId()}`;
  }
  @Module({ providers: [ConfigService], exports: [ConfigService] })
  class ConfigModule {}

  @Injectable()
  class OptionsFactory implements dogpileCacheManager.CacheOptionsFactory {
    constructor(@Inject(ConfigService) private readonly config: ConfigService) {}
    createCacheOptions() {
      return { ttl: this.config.ttl, redis: server.url, prefix: this.config.prefix };
    }
  }

  const variants: [string, () => DynamicModule][] = [
    ['registerAsync({ useFactory, inject, imports })', () => CacheModule.registerAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (c: ConfigService) => ({ ttl: c.ttl, redis: server.url, prefix: c.prefix }) })],
    ['registerAsync({ useClass, imports })', () => CacheModule.registerAsync({ imports: [ConfigModule], useClass: OptionsFactory })],
    [
      'registerAsync({ useExisting, imports })',
      () => {
        @Module({ imports: [ConfigModule], providers: [OptionsFactory], exports: [OptionsFactory] })
        class FactoryModule {}
        return CacheModule.registerAsync({ imports: [FactoryModule], useExisting: OptionsFactory });
      },
    ],
    ['registerAsync({ useFactory, inject, extraProviders })', () => CacheModule.registerAsync({ extraProviders: [ConfigService], inject: [ConfigService], useFactory: (c: ConfigService) => ({ ttl: c.ttl, redis: server.url, prefix: c.prefix }) })],
  ];
  it.each(variants)('%s: the options made by the provider apply (ttl)', async (_, make) => {
    const { ctx, cache } = await contextWith([make()]);
    try {
      await cache.set('a', 1);
      const until = await cache.ttl('a');
      const now = Date.now();
      // The default ttl is the factory's 4321 ms (measured on the Redis server's clock; generous for the clocks' offset).
      expect(until! - now).toBeGreaterThan(3000);
      expect(until! - now).toBeLessThanOrEqual(4321 + 1000);
    } finally {
      await ctx.close();
    }
  });

  it('isGlobal: a module that does not import CacheModule injects CACHE_MANAGER', async () => {
    @Injectable()
    class Deep {
      constructor(@Inject(CACHE_MANAGER) readonly cache: Cache) {}
    }
    @Module({ providers: [Deep], exports: [Deep] })
    class FeatureModule {}
    @Module({ imports: [CacheModule.register({ isGlobal: true }), FeatureModule] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      expect(ctx.get(Deep).cache).toBe(ctx.get(CACHE_MANAGER));
    } finally {
      await ctx.close();
    }
    @Module({ imports: [CacheModule.register(), FeatureModule] })
    class NotGlobal {}
    await expect(NestFactory.createApplicationContext(NotGlobal, { logger: false, abortOnError: false })).rejects.toThrow(/CACHE_MANAGER/);
  });

  it('closes the cache and the Redis connection it made from a URL when the app closes; a cache passed in stays open', async () => {
    const name = `ncm-close-${freshId()}`;
    const clients = async () => ((await redis.client('LIST')) as string).split('\n').filter((l) => l.includes('cmd=')).length;
    const before = await clients();
    const { ctx, cache } = await contextWith([CacheModule.register({ redis: server.url, prefix: name })]);
    await cache.set('x', 1, 1000);
    expect(await clients()).toBeGreaterThan(before);
    await ctx.close();
    await expect(cache.get('x')).rejects.toThrow(CacheClosedError);
    expect(await clients()).toBe(before);

    const given = createCache();
    const second = await contextWith([CacheModule.register({ cache: given })]);
    await second.ctx.close();
    expect(await given.getOrCompute('still-open', () => 'yes', 1000)).toBe('yes');
    await given.close();
  });

  it('refuses options it does not support, by name, with what to use instead', async () => {
    const refused = async (options: Record<string, unknown>) => {
      const error = await contextWith([CacheModule.register(options)]).then(
        async ({ ctx }) => {
          await ctx.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidOptionError);
      return error as InvalidOptionError;
    };
    const stores = await refused({ stores: [{}] });
    expect(stores.option).toBe('stores');
    expect(stores.message).toMatch(/redis/);
    expect((await refused({ nonBlocking: true })).option).toBe('nonBlocking');
    expect((await refused({ refreshAllStores: true })).option).toBe('refreshAllStores');
    const typo = await refused({ tll: 5 });
    expect(typo.option).toBe('tll');
    expect(typo.message).toMatch(/did you mean ttl/);
    expect((await refused({ ttl: -1 })).option).toBe('ttl');
    expect((await refused({ ttl: MAX_DURATION_MS + 1 })).option).toBe('ttl');
    expect((await refused({ namespace: '' })).option).toBe('namespace');
    expect(() => CacheTTL(-5)).toThrow(InvalidOptionError);
    expect(() => CacheKey('')).toThrow(InvalidOptionError);
  });
});

describe('the injected Cache when Redis does not answer', () => {
  it('get, mget and ttl answer a miss and emit their event with the error; writes reject with BackendError', async () => {
    // A port nothing listens on (the server was stopped), and no offline queue: every command fails at once.
    const dead = new RedisServer();
    await dead.start();
    const url = dead.url;
    await dead.stop();
    const client = new IORedis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    const given = createCache({ redis: client, commandTimeout: 200 });
    @Module({ imports: [CacheModule.register({ cache: given })] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      const cache = ctx.get<Cache>(CACHE_MANAGER);
      const errors: unknown[] = [];
      cache.on('get', (data) => errors.push(data.error));
      expect(await cache.get('k')).toBeUndefined();
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(BackendError);
      expect(await cache.mget(['a', 'b'])).toEqual([undefined, undefined]);
      expect(await cache.ttl('k')).toBeUndefined();
      await expect(cache.set('k', 1, 1000)).rejects.toBeInstanceOf(BackendError);
    } finally {
      await ctx.close();
      await given.close();
      client.disconnect();
    }
  });
});

describe('CacheInterceptor outside HTTP (microservices, WebSockets)', () => {
  class EventsGateway {
    @CacheKey('events')
    events() {}
    uncached() {}
  }
  /** An execution context of type `type` for `handler` of EventsGateway. */
  const contextOf = (type: string, handler: () => void) =>
    ({
      getType: () => type,
      getClass: () => EventsGateway,
      getHandler: () => handler,
      // A WebSocket handler's arguments: the client, then the message's data (here a string).
      getArgs: () => [{}, 'payload'],
      getArgByIndex: (i: number) => [{}, 'payload'][i],
      switchToHttp: () => ({ getRequest: () => ({}), getResponse: () => 'payload', getNext: () => undefined }),
      switchToRpc: () => ({}),
      switchToWs: () => ({}),
    }) as unknown as ExecutionContext;

  it('caches only handlers with @CacheKey, under that key, and runs them once for concurrent calls', async () => {
    @Module({ imports: [CacheModule.register({ ttl: 10_000 })] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      const cache = ctx.get<Cache>(CACHE_MANAGER);
      const interceptor = new CacheInterceptor(cache, new Reflector());
      let runs = 0;
      const next = { handle: () => of(++runs) };
      const call = async (handler: () => void) => firstValueFrom(await interceptor.intercept(contextOf('ws', handler), next));
      const proto = EventsGateway.prototype;
      expect(await Promise.all([call(proto.events), call(proto.events), call(proto.events)])).toEqual([1, 1, 1]);
      expect(await cache.get('events')).toBe(1);
      expect([await call(proto.uncached), await call(proto.uncached)]).toEqual([2, 3]);
    } finally {
      await ctx.close();
    }
  });
});

describe.each(['express', 'fastify'] as Platform[])('CacheInterceptor and its decorators on %s', (platform) => {
  const runs = new Map<string, number>();
  const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1).get(name)!;
  const prefix = `ncm-int-${platform}-${freshId()}`;
  let app: Running;

  @Injectable()
  class ByHeader extends CacheInterceptor {
    protected override trackBy(context: ExecutionContext): string | undefined {
      const tenant = context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-tenant'];
      return tenant ? `tenant:${tenant}` : undefined;
    }
  }

  @Injectable()
  class PostsToo extends CacheInterceptor {
    protected override isRequestCacheable(context: ExecutionContext): boolean {
      const req = context.switchToHttp().getRequest<{ method: string; headers: Record<string, string> }>();
      return req.headers['x-no-cache'] === undefined && ['GET', 'POST'].includes(req.method);
    }
  }

  @Controller('i')
  @UseInterceptors(CacheInterceptor)
  @CacheTTL(7000)
  class InterceptedController {
    @Get('class-ttl')
    classTtl() {
      return { run: ran('class-ttl') };
    }
    @Get('factory-ttl/:n')
    @CacheTTL((ctx) => Number(ctx.switchToHttp().getRequest<{ params: { n: string } }>().params.n))
    factoryTtl() {
      return { run: ran('factory-ttl') };
    }
    @Get('factory-key/:id')
    @CacheKey((ctx) => `item-${ctx.switchToHttp().getRequest<{ params: { id: string } }>().params.id}`)
    factoryKey(@Param('id') id: string) {
      return { id, run: ran(`factory-key-${id}`) };
    }
    @Get('fails')
    fails() {
      ran('fails');
      throw new Error('boom');
    }
  }

  @Controller('t')
  @UseInterceptors(ByHeader)
  class TrackedController {
    @Get('a')
    a() {
      return { run: ran('tracked') };
    }
  }

  @Controller('p')
  @UseInterceptors(PostsToo)
  class PostController {
    @Post('a')
    a() {
      return { run: ran('posted') };
    }
  }

  beforeAll(async () => {
    @Module({ imports: [CacheModule.register({ redis: server.url, prefix, ttl: 3000 })], controllers: [InterceptedController, TrackedController, PostController] })
    class AppModule {}
    app = await listen(AppModule, platform);
  });
  afterAll(async () => {
    await app?.close();
  });

  const pttl = (key: string) => redis.pttl(cacheKeys(prefix, key).value);

  it('@CacheTTL on the controller applies to its handlers (ms)', async () => {
    await get(app.port, '/i/class-ttl');
    const left = await pttl('/i/class-ttl');
    expect(left).toBeGreaterThan(5000);
    expect(left).toBeLessThanOrEqual(7000);
  });

  it('@CacheTTL with a factory of the context, over the controller’s', async () => {
    await get(app.port, '/i/factory-ttl/12345');
    const left = await pttl('/i/factory-ttl/12345');
    expect(left).toBeGreaterThan(10_000);
    expect(left).toBeLessThanOrEqual(12_345);
  });

  it('@CacheKey with a factory of the context', async () => {
    const a = await get(app.port, '/i/factory-key/9');
    const b = await get(app.port, '/i/factory-key/9');
    expect([a.xCache, b.xCache]).toEqual(['MISS', 'HIT']);
    expect(runs.get('factory-key-9')).toBe(1);
    expect(await app.app.get<Cache>(CACHE_MANAGER).get('item-9')).toEqual({ id: '9', run: 1 });
  });

  it('a handler error is not cached: the next request runs the handler again', async () => {
    const a = await get(app.port, '/i/fails');
    const b = await get(app.port, '/i/fails');
    expect([a.status, b.status]).toEqual([500, 500]);
    expect(runs.get('fails')).toBe(2);
  });

  it('a trackBy() override keys requests; undefined lets them through', async () => {
    const a = await get(app.port, '/t/a', { 'x-tenant': 'acme' });
    const b = await get(app.port, '/t/a', { 'x-tenant': 'acme' });
    const c = await get(app.port, '/t/a');
    const d = await get(app.port, '/t/a');
    expect(json(b)).toEqual(json(a));
    expect(json(c).run).toBe(2);
    expect(json(d).run).toBe(3);
    expect(await app.app.get<Cache>(CACHE_MANAGER).get('tenant:acme')).toEqual(json(a));
  });

  it('a GET with Authorization or Cookie is not cached by its URL (one user\'s answer is never another\'s); a trackBy() override with the identity caches it', async () => {
    const a = await get(app.port, '/i/class-ttl', { authorization: 'Bearer alice' });
    const b = await get(app.port, '/i/class-ttl', { authorization: 'Bearer bob' });
    const c = await get(app.port, '/i/class-ttl', { cookie: 'sid=carol' });
    expect(new Set([json(a).run, json(b).run, json(c).run]).size).toBe(3);
    // ByHeader keys by tenant: the app said what the answer depends on.
    const d = await get(app.port, '/t/a', { 'x-tenant': 'cred', authorization: 'Bearer alice' });
    const e = await get(app.port, '/t/a', { 'x-tenant': 'cred', authorization: 'Bearer alice' });
    expect(json(e)).toEqual(json(d));
  });

  it('an isRequestCacheable() override decides which requests are cached', async () => {
    const a = await get(app.port, '/p/a', {}, 'POST');
    const b = await get(app.port, '/p/a', {}, 'POST');
    const c = await get(app.port, '/p/a', { 'x-no-cache': '1' }, 'POST');
    expect([json(a).run, json(b).run, json(c).run]).toEqual([1, 1, 2]);
  });
});

describe.each(['redis', 'memory'])('the injected Cache (%s)', (store) => {
  let cache: Cache;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const options = store === 'redis' ? { redis: server.url, prefix: `ncm-cache-${freshId()}` } : {};
    @Module({ imports: [CacheModule.register({ ...options, ttl: 60_000 })] })
    class AppModule {}
    const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    cache = ctx.get(CACHE_MANAGER);
    close = () => ctx.close();
  });
  afterAll(async () => {
    await close?.();
  });

  it('set / get / del, with set answering the value', async () => {
    expect(await cache.set('a', { n: 1 }, 5000)).toEqual({ n: 1 });
    expect(await cache.get('a')).toEqual({ n: 1 });
    expect(await cache.del('a')).toBe(true);
    expect(await cache.get('a')).toBeUndefined();
  });

  it('a TTL in ms: the value is gone once it passes', async () => {
    await cache.set('short', 'v', 150);
    expect(await cache.get('short')).toBe('v');
    await sleep(400);
    expect(await cache.get('short')).toBeUndefined();
  });

  it('ttl(key): when the value expires, ms since the epoch; undefined without one', async () => {
    await cache.set('t', 1, 8000);
    const until = (await cache.ttl('t'))!;
    expect(until - Date.now()).toBeGreaterThan(6000);
    expect(until - Date.now()).toBeLessThanOrEqual(9000);
    expect(await cache.ttl('absent')).toBeUndefined();
  });

  it('mset / mget / mdel', async () => {
    const list = await cache.mset([
      { key: 'm1', value: 1 },
      { key: 'm2', value: 2, ttl: 5000 },
    ]);
    expect(list).toEqual([
      { key: 'm1', value: 1, ttl: 60_000 },
      { key: 'm2', value: 2, ttl: 5000 },
    ]);
    expect(await cache.mget(['m1', 'm2', 'm3'])).toEqual([1, 2, undefined]);
    expect(await cache.mdel(['m1', 'm2'])).toBe(true);
    expect(await cache.mget(['m1', 'm2'])).toEqual([undefined, undefined]);
  });

  it('clear() drops every value', async () => {
    await cache.set('c1', 1);
    await cache.set('c2', 2);
    expect(await cache.clear()).toBe(true);
    expect(await cache.mget(['c1', 'c2'])).toEqual([undefined, undefined]);
  });

  it('wrap(): 100 concurrent calls run fn once; then the value is answered from the cache', async () => {
    let runs = 0;
    const fn = async () => {
      runs++;
      await sleep(50);
      return { runs };
    };
    const values = await Promise.all(Array.from({ length: 100 }, () => cache.wrap('w', fn, 5000)));
    expect(runs).toBe(1);
    expect(values.every((v) => v.runs === 1)).toBe(true);
    expect(await cache.wrap('w', fn)).toEqual({ runs: 1 });
    expect(await cache.get('w')).toEqual({ runs: 1 });
  });

  it('wrap() with a TTL function of the value, and the options form with raw', async () => {
    await cache.wrap('fttl', () => 'x', (value: string) => (value === 'x' ? 4000 : 1));
    const until = (await cache.ttl('fttl'))!;
    expect(until - Date.now()).toBeGreaterThan(2500);
    expect(until - Date.now()).toBeLessThanOrEqual(5000);
    const raw = await cache.wrap('raw', () => 5, { ttl: 3000, raw: true });
    expect(raw.value).toBe(5);
    expect(raw.expires! - Date.now()).toBeGreaterThan(1500);
    expect(raw.expires! - Date.now()).toBeLessThanOrEqual(4000);
  });

  it('wrap() with refreshThreshold: past the point, the value is answered at once and refreshed once', async () => {
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const fn = async () => {
      runs++;
      if (runs === 2) await gate;
      return runs;
    };
    const refreshes: unknown[] = [];
    const onRefresh = (data: { key: string; value: unknown }) => refreshes.push([data.key, data.value]);
    cache.on('refresh', onRefresh);
    // Lives 10 s; inside its last 9.8 s (after 200 ms) a read refreshes it.
    expect(await cache.wrap('r', fn, 10_000, 9800)).toBe(1);
    await sleep(400);
    // Past its refresh point the value is wrap()'s to serve (it has a function to refresh it with), not get()'s.
    expect(await cache.get('r')).toBeUndefined();
    expect((await cache.ttl('r'))! - Date.now()).toBeGreaterThan(8000);
    let during: number[];
    try {
      during = await Promise.all(Array.from({ length: 20 }, () => cache.wrap('r', fn, 10_000, 9800)));
    } finally {
      release();
    }
    expect(during).toEqual(Array(20).fill(1));
    const refreshed = await (async () => {
      for (let i = 0; i < 200; i++) {
        if ((await cache.get('r')) === 2) return true;
        await sleep(25);
      }
      return false;
    })();
    expect(refreshed).toBe(true);
    expect(runs).toBe(2);
    cache.off('refresh', onRefresh);
    expect(refreshes).toEqual([['r', 2]]);
  });

  it('a wrap() fn that throws rejects every caller and stores nothing', async () => {
    const fn = () => Promise.reject(new Error('nope'));
    await expect(cache.wrap('e', fn, 1000)).rejects.toThrow('nope');
    expect(await cache.get('e')).toBeUndefined();
  });

  it('events: on / off with cache-manager’s names', async () => {
    const seen: string[] = [];
    const onSet = (data: { key: string }) => seen.push(`set ${data.key}`);
    const onDel = (data: { key: string }) => seen.push(`del ${data.key}`);
    cache.on('set', onSet);
    cache.on('del', onDel);
    await cache.set('ev', 1);
    await cache.del('ev');
    cache.off('set', onSet);
    cache.off('del', onDel);
    await cache.set('ev', 2);
    expect(seen).toEqual(['set ev', 'del ev']);
  });

  it('cacheId() and stores', () => {
    expect(typeof cache.cacheId()).toBe('string');
    expect(cache.stores).toEqual([]);
  });

  it('refuses bad arguments by name', async () => {
    await expect(cache.set('k', 1, -1)).rejects.toMatchObject({ option: 'ttl' });
    await expect(cache.wrap('k', () => 1, { ttl: 10, tll: 5 } as never)).rejects.toMatchObject({ option: 'tll' });
    await expect(cache.get('')).rejects.toMatchObject({ option: 'key' });
  });
});
