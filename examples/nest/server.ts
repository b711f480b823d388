/**
 * NestJS + dogpile-guard: `@Cached()` routes are cached, and concurrent misses for one URL
 * run the handler once — in this process, or across every process sharing REDIS_URL.
 *
 *   node --import tsx examples/nest/server.ts
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=3001 node --import tsx examples/nest/server.ts
 *
 * Constructor parameters name their providers with `@Inject(...)`, so the example also runs
 * under tools that do not emit decorator metadata (tsx, esbuild, vitest).
 */
import 'reflect-metadata';
import { Controller, Get, Inject, Injectable, Module, Param } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cached, DogpileModule } from 'dogpile-guard/nest';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';

/** A slow "database": 200 ms per query, every query counted. */
@Injectable()
class ProductsService {
  dbQueries = 0;

  async find(id: string) {
    this.dbQueries++;
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { id, name: `Product ${id}`, queriedAt: new Date().toISOString(), pid: process.pid };
  }
}

@Controller()
class ProductsController {
  constructor(@Inject(ProductsService) private readonly products: ProductsService) {}

  // Cached for 30 s; concurrent misses for one URL wait for the first request's result.
  @Get('products/:id')
  @Cached('30s')
  findOne(@Param('id') id: string) {
    return this.products.find(id);
  }

  // Uses the module's default TTL (ttl below).
  @Get('catalog')
  @Cached()
  async catalog() {
    return { products: await Promise.all(['1', '2', '3'].map((id) => this.products.find(id))) };
  }

  // Not decorated: not cached.
  @Get('stats')
  stats() {
    return { dbQueries: this.products.dbQueries, pid: process.pid };
  }
}

@Module({
  imports: [
    // With REDIS_URL: one cache for every process on that Redis (the module opens the
    // connection and closes it on shutdown). Without: in this process.
    DogpileModule.forRoot({ redis: process.env.REDIS_URL || undefined, ttl: '5m', isGlobal: true }),
  ],
  controllers: [ProductsController],
  providers: [ProductsService],
})
class AppModule {}

const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
await app.listen(port, host);
const address = app.getHttpServer().address() as { port: number };
console.log(`listening on http://${host}:${address.port} (cache: ${process.env.REDIS_URL ? 'Redis' : 'in-process'})`);
console.log(`try: curl -i http://${host}:${address.port}/products/42`);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: closing`);
  await app.close(); // DogpileModule closes the cache and the Redis connection it opened
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
