/**
 * The frame both shared HTTP suites run in (`test/fixtures/http-suite.ts` for Express and
 * Fastify, `test/support/web-suite.ts` for Hono, Koa and `fetch` handlers): one app of one
 * framework over real sockets, once with an in-process cache, once with a cache on a
 * throwaway Redis, and the helpers their tests use. Each app reports its handler runs through
 * `count(route, id)`; `ran(route, id)` reads them back.
 */
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { createCache, type DogpileCache } from '../../src/index.js';
import type { HttpCacheOptions } from '../../src/http/options.js';
import { useRedis } from './use-redis.js';
import { waitUntil } from '../../tools/basics.js';
import { fetchReply, type Reply } from '../../tools/http-client.js';
import type { RedisServer } from '../../tools/redis-server.js';

/** The largest body the suite's main app stores (`maxBodySize`). */
export const MAX_BODY = 300_000;

export type Backend = 'memory' | 'redis';
export type Count = (route: string, id: string) => void;

/** A running app: what the tests talk to. */
export interface SuiteApp {
  port: number;
  close(): Promise<void>;
}

/** The guard options every framework's app takes as they are. */
export type BaseGuard = Pick<HttpCacheOptions, 'cache' | 'maxBodySize' | 'statuses' | 'privateHeaders'>;

/** How a suite starts an app of its framework. */
export interface AppFactory<G extends BaseGuard> {
  framework: string;
  /** The Redis key prefix of the suite's caches (its own, so suites never share entries). */
  prefix: string;
  start(options: { guard: G; count: Count; routeTtl?: number }): Promise<SuiteApp>;
}

export interface Harness<G extends BaseGuard> {
  framework: string;
  backend: Backend;
  /** The Redis server of the `redis` run; undefined in the `memory` run. */
  redis: RedisServer | undefined;
  /** The suite's cache, and its app (guarded with `maxBodySize: MAX_BODY`, `/route-ttl` with 2 s). */
  cache(): DogpileCache;
  app(): SuiteApp;
  /** How many `waitTimeout` events the suite's cache has emitted so far. */
  waitTimeouts(): number;
  /** The X-Cache of a response served from the cache right after the leader's. */
  HIT: unknown;
  ran(route: string, id: string): number;
  count: Count;
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  all(n: number, path: string, headers?: Record<string, string>): Promise<Reply[]>;
  /** Resolves once a handler run for `route`/`id` has started (the leader is leading). */
  handlerStarted(route: string, id: string): Promise<boolean>;
  xCaches(replies: Reply[]): (string | undefined)[];
  /** Starts another app on the suite's cache (unless `guard` names one), closed after the suite. */
  startExtra(guard: G): Promise<SuiteApp>;
  /** Starts an app with exactly these options, closed after the suite. */
  startOwn(guard: G): Promise<SuiteApp>;
}

/** Runs `body` once per backend, inside `describe('<framework> adapter, <backend> cache')`. */
export function describeAdapter<G extends BaseGuard>(factory: AppFactory<G>, body: (h: Harness<G>) => void): void {
  const { framework } = factory;
  describe.each(['memory', 'redis'] as const)(`${framework} adapter, %s cache`, (backend) => {
    const redis = backend === 'redis' ? useRedis() : undefined;
    let cache: DogpileCache;
    let app: SuiteApp;
    let waitTimeouts = 0;
    const runs = new Map<string, number>();
    const extraApps: SuiteApp[] = [];
    const ran = (route: string, id: string) => runs.get(`${route}:${id}`) ?? 0;
    const count = (route: string, id: string) => {
      runs.set(`${route}:${id}`, ran(route, id) + 1);
    };
    const get = (path: string, headers?: Record<string, string>) => fetchReply(app.port, path, { headers });
    const startOwn = async (guard: G) => {
      const own = await factory.start({ guard, count });
      extraApps.push(own);
      return own;
    };

    beforeAll(async () => {
      cache = redis ? createCache({ redis: redis.client(), prefix: `${factory.prefix}${framework}` }) : createCache();
      cache.on('waitTimeout', () => waitTimeouts++);
      app = await factory.start({ guard: { cache, maxBodySize: MAX_BODY } as G, count, routeTtl: 2000 });
    });

    afterAll(async () => {
      await app?.close();
      for (const extra of extraApps) await extra.close();
      await cache?.close();
    });

    body({
      framework,
      backend,
      redis,
      cache: () => cache,
      app: () => app,
      waitTimeouts: () => waitTimeouts,
      // A request sent right after the leader's response may still find the store-and-release
      // round trip to Redis in flight: it then waits for it and says COALESCED instead of HIT.
      HIT: backend === 'memory' ? 'HIT' : expect.stringMatching(/^(HIT|COALESCED)$/),
      ran,
      count,
      get,
      all: (n, path, headers) => Promise.all(Array.from({ length: n }, () => get(path, headers))),
      handlerStarted: (route, id) => waitUntil(`${route} started`, () => ran(route, id) > 0, 10_000, 2),
      xCaches: (replies) => replies.map((r) => r.xCache).sort(),
      startExtra: (guard) => startOwn({ cache, ...guard }),
      startOwn,
    });
  });
}
