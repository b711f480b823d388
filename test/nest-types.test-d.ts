import { Controller, Get, Injectable, Module, Post, type ExecutionContext } from '@nestjs/common';
import { expectTypeOf, test } from 'vitest';
import type { DogpileCache } from '../src/index.js';
import { Cached, DogpileInterceptor, DogpileModule, InjectCache, InvalidateTags, type CachedOptions, type DogpileModuleOptions } from '../src/nest/index.js';

test('@Cached takes a TTL, a TTL function or options, on handlers and classes', () => {
  @Controller('a')
  @Cached('5m')
  class A {
    @Get('1') @Cached(30_000) one() {}
    @Get('2') @Cached('1m') two() {}
    @Get('3') @Cached((ctx) => (ctx.getType() === 'http' ? '1m' : 1000)) three() {}
    @Get('4') @Cached({ ttl: async () => 5000, key: (ctx) => ctx.switchToHttp().getRequest<{ url: string }>().url }) four() {}
    @Get('5') @Cached() five() {}
    @Get('6') @Cached({ ttl: '1m', tags: ['products'] }) six() {}
    @Get('7') @Cached({ tags: async (ctx) => [ctx.getType()] }) seven() {}
    @Post('8') @InvalidateTags(['products']) eight() {}
    @Post('9') @InvalidateTags((ctx) => [ctx.getType()]) nine() {}
  }
  void A;
  expectTypeOf<NonNullable<CachedOptions['key']>>().parameter(0).toEqualTypeOf<ExecutionContext>();
  // @ts-expect-error not a duration
  Cached('soon');
  // @ts-expect-error unknown option
  Cached({ ttl: '1m', store: 'x' });
  // @ts-expect-error tags are strings
  Cached({ tags: [1] });
  // @ts-expect-error a list or a function
  InvalidateTags('products');
});

test('DogpileModule.forRoot / forRootAsync options', () => {
  @Injectable()
  class Service {
    constructor(@InjectCache() readonly cache: DogpileCache) {}
  }
  @Module({
    imports: [
      DogpileModule.forRoot({ redis: 'redis://localhost:6380', ttl: '1m', l1: true, isGlobal: true }),
      DogpileModule.forRootAsync({ useFactory: async (): Promise<DogpileModuleOptions> => ({ prefix: 'x' }), inject: [], isGlobal: true }),
    ],
    providers: [Service],
  })
  class AppModule {}
  void AppModule;
  // @ts-expect-error not a duration
  DogpileModule.forRoot({ ttl: 'soon' });
});

test('trackBy can be overridden', () => {
  class ByTenant extends DogpileInterceptor {
    protected override async trackBy(context: ExecutionContext): Promise<string | undefined> {
      const key = await super.trackBy(context);
      return key && `${key}|tenant`;
    }
  }
  expectTypeOf<ByTenant>().toMatchTypeOf<DogpileInterceptor>();
});
