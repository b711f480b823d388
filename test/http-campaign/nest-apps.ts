/**
 * The campaign's Nest apps, on Express and on Fastify: one controller whose handlers echo what
 * they see exactly as the other campaign apps do (apps.ts: `answer()`), one handler per route
 * kind since a Nest route's own header fields are its `@Header()` decorators. Guarded: the
 * controller is `@Cached` with the campaign's options, on a `DogpileModule` over the cache.
 * A handler's value is the echoed body as an object (Nest writes it as JSON); `/stream/` and
 * `/broken/` return a stream (`StreamableFile`), which the interceptor never stores.
 */
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { Controller, Delete, Get, Patch, Post, Put, Header, Module, Req, StreamableFile, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { DogpileCache } from '../../src/index.js';
import { Cached, DogpileModule } from '../../src/nest/index.js';
import { answer, GUARD, nodeBody, nodeSeen, recordNodeRun, TAG, VALIDATORS, type Adapter, type RunningApp } from './apps.js';

/** An Express request or a Fastify one, as a Nest handler gets it with `@Req()`. */
interface AnyRequest {
  method: string;
  url: string;
  originalUrl?: string;
  path?: string;
  query: unknown;
  headers: IncomingMessage['headers'];
  raw?: IncomingMessage;
}

function respond(adapter: Adapter, guarded: boolean, req: AnyRequest): unknown {
  const raw = req.raw ?? (req as unknown as IncomingMessage);
  const target = req.originalUrl ?? req.url;
  recordNodeRun(adapter, raw, target, guarded);
  const a = answer(nodeSeen(req.method, target, req.path ?? target.split('?')[0]!, req.query, req.headers));
  if (a.chunks.length > 1 || a.broken) return new StreamableFile(nodeBody(a), { type: a.headers['content-type'] });
  return JSON.parse(a.chunks[0]!) as unknown;
}

function controller(adapter: Adapter, guarded: boolean): Type {
  const echo = (req: AnyRequest) => respond(adapter, guarded, req);
  // A wildcard to the end of the path: path-to-regexp (Express 5) names it, find-my-way (Fastify) does not.
  const rest = adapter === 'nest-fastify' ? '*' : '*rest';

  @Controller()
  class CampaignController {
    @Get(`vary/${rest}`)
    @Header('Vary', 'Accept-Language')
    vary(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`val/${rest}`)
    @Header('ETag', VALIDATORS.etag)
    @Header('Last-Modified', VALIDATORS.lastModified)
    @Header('Dogpile-Tags', TAG)
    val(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`cookie/${rest}`)
    @Header('Set-Cookie', 'sid=1; Path=/')
    cookie(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`private/${rest}`)
    @Header('Cache-Control', 'private, max-age=60')
    private(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`nostore/${rest}`)
    @Header('Cache-Control', 'no-store')
    nostore(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`targeted/${rest}`)
    @Header('Cache-Control', 'public, max-age=0')
    @Header('Dogpile-Cache-Control', 'max-age=1')
    targeted(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`stream/${rest}`)
    @Header('Dogpile-Tags', TAG)
    stream(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(`broken/${rest}`)
    broken(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Get(rest)
    @Header('Dogpile-Tags', TAG)
    catchAll(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Post(rest)
    post(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Put(rest)
    put(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Patch(rest)
    patch(@Req() req: AnyRequest) {
      return echo(req);
    }

    @Delete(rest)
    delete(@Req() req: AnyRequest) {
      return echo(req);
    }
  }
  if (guarded) Cached(GUARD)(CampaignController);
  return CampaignController;
}

/** Starts the Nest app of `adapter` on a free port: `@Cached` on `cache`, or bare when `cache` is undefined. */
export async function startNestApp(adapter: 'nest-express' | 'nest-fastify', cache: DogpileCache | undefined): Promise<RunningApp> {
  @Module({ imports: cache === undefined ? [] : [DogpileModule.forRoot({ cache })], controllers: [controller(adapter, cache !== undefined)] })
  class CampaignModule {}
  const platform = adapter === 'nest-express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(CampaignModule, platform, { logger: false });
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as { address(): AddressInfo; closeAllConnections?(): void };
  return {
    port: server.address().port,
    close: async () => {
      server.closeAllConnections?.();
      await app.close();
    },
  };
}
