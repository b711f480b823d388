/**
 * Child process of `bench/nest.bench.ts`: one NestJS 12 app (Express platform) serving the
 * benchmarked route with one contender's caching.
 *
 *   node --import tsx bench/nest-worker.ts <dogpile|dogpile-l1|cache-manager|dogpile-cache-manager> <redis url> <prefix> <handler ms>
 *
 * `dogpile-cache-manager` is the `cache-manager` app with one import changed: to
 * `dogpile-guard/nest/cache-manager`, whose `register()` is given `redis` instead of `stores`.
 *
 * Routes: `GET /product?id=` (cached, the handler takes <handler ms>), `GET /runs?id=`
 * (uncached: how many times the handler ran for that id in this process) and `GET /cpu`
 * (uncached: CPU time this process has used, in µs). Prints
 * `listening <port>`; closes the app and exits when stdin ends.
 */
import 'reflect-metadata';
import { Controller, Get, Inject, Module, Query, UseInterceptors, type DynamicModule, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CacheInterceptor, CacheModule, CacheTTL } from '@nestjs/cache-manager';
import KeyvRedis from '@keyv/redis';
import Keyv from 'keyv';
import { Cached, DogpileModule } from '../src/nest/index.js';
import * as DropIn from '../src/nest/cache-manager/index.js';

const TTL_MS = 60_000;

const [contender, redisUrl, prefix, handlerMs] = process.argv.slice(2);
if (!contender || !redisUrl || !prefix || !handlerMs) throw new Error('usage: nest-worker.ts <contender> <redis url> <prefix> <handler ms>');
/** How long the handler takes on a miss. */
const HANDLER_MS = Number(handlerMs);

const RUNS = Symbol('runs');
type Runs = Map<string, number>;

/** The value every handler returns (about 300 bytes as JSON). */
async function product(runs: Runs, id: string) {
  runs.set(id, (runs.get(id) ?? 0) + 1);
  await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  return {
    id,
    name: `product ${id}`,
    price: 1999,
    currency: 'EUR',
    tags: ['bench', 'nest', 'cache'],
    description: 'A product description that is long enough to look like a real payload in a JSON API response body.',
    stock: { warehouse: 'north', count: 42 },
    updatedAt: '2024-01-01T00:00:00.000Z',
  };
}

function cpuMicros() {
  const { user, system } = process.cpuUsage();
  return { micros: user + system };
}

@Controller()
class DogpileController {
  constructor(@Inject(RUNS) private readonly runs: Runs) {}
  @Get('product')
  @Cached(TTL_MS)
  get(@Query('id') id: string) {
    return product(this.runs, id);
  }
  @Get('runs')
  count(@Query('id') id: string) {
    return { runs: this.runs.get(id) ?? 0 };
  }
  @Get('cpu')
  cpu() {
    return cpuMicros();
  }
}

@Controller()
class CacheManagerController {
  constructor(@Inject(RUNS) private readonly runs: Runs) {}
  @Get('product')
  @UseInterceptors(CacheInterceptor)
  @CacheTTL(TTL_MS)
  get(@Query('id') id: string) {
    return product(this.runs, id);
  }
  @Get('runs')
  count(@Query('id') id: string) {
    return { runs: this.runs.get(id) ?? 0 };
  }
  @Get('cpu')
  cpu() {
    return cpuMicros();
  }
}

@Controller()
class DropInController {
  constructor(@Inject(RUNS) private readonly runs: Runs) {}
  @Get('product')
  @UseInterceptors(DropIn.CacheInterceptor)
  @DropIn.CacheTTL(TTL_MS)
  get(@Query('id') id: string) {
    return product(this.runs, id);
  }
  @Get('runs')
  count(@Query('id') id: string) {
    return { runs: this.runs.get(id) ?? 0 };
  }
  @Get('cpu')
  cpu() {
    return cpuMicros();
  }
}

function setup(): { imports: DynamicModule[]; controller: Type<unknown> } {
  switch (contender) {
    case 'dogpile':
      return { imports: [DogpileModule.forRoot({ redis: redisUrl, prefix, isGlobal: true })], controller: DogpileController };
    case 'dogpile-l1':
      return { imports: [DogpileModule.forRoot({ redis: redisUrl, prefix, l1: true, isGlobal: true })], controller: DogpileController };
    case 'cache-manager':
      return {
        imports: [CacheModule.register({ stores: [new Keyv({ store: new KeyvRedis(redisUrl), namespace: prefix })], ttl: TTL_MS })],
        controller: CacheManagerController,
      };
    case 'dogpile-cache-manager':
      return { imports: [DropIn.CacheModule.register({ redis: redisUrl, prefix, ttl: TTL_MS })], controller: DropInController };
    default:
      throw new Error(`unknown contender ${contender}`);
  }
}

const { imports, controller } = setup();

@Module({ imports, controllers: [controller], providers: [{ provide: RUNS, useValue: new Map() }] })
class BenchModule {}

const app = await NestFactory.create(BenchModule, { logger: ['error'] });
await app.listen(0, '127.0.0.1');
process.stdout.write(`listening ${(app.getHttpServer().address() as { port: number }).port}\n`);

process.stdin.resume();
process.stdin.on('end', () => {
  void app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
