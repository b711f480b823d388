/**
 * Which Redis client the tests hand to the library: `DOGPILE_TEST_CLIENT` = `ioredis5`
 * (default), `ioredis6`, `iovalkey`, `node-redis` (redis 6) or `node-redis5`. Child processes
 * inherit the variable, so workers use the same client as the test that started them.
 *
 * - `IoRedis` is the ioredis-compatible module for every client made with it (the harness's
 *   `server.client()`, fixtures): ioredis 6 or iovalkey when selected, else ioredis 5.
 * - `libraryClient(url)` is the client the library is given: node-redis when selected (connected
 *   here), else an `IoRedis` client.
 */
import { createRequire } from 'node:module';
import type { RedisClient } from '../src/redis/client.js';
import type { NodeRedisClient } from '../src/redis/node-redis.js';

export const TEST_CLIENTS = ['ioredis5', 'ioredis6', 'iovalkey', 'node-redis', 'node-redis5'] as const;
export type TestClientName = (typeof TEST_CLIENTS)[number];

function selected(): TestClientName {
  const value = process.env.DOGPILE_TEST_CLIENT ?? 'ioredis5';
  if (!(TEST_CLIENTS as readonly string[]).includes(value)) {
    throw new Error(`DOGPILE_TEST_CLIENT must be one of ${TEST_CLIENTS.join(', ')}, got ${JSON.stringify(value)}`);
  }
  return value as TestClientName;
}

export const TEST_CLIENT: TestClientName = selected();
export const NODE_REDIS_SELECTED = TEST_CLIENT === 'node-redis' || TEST_CLIENT === 'node-redis5';

const require = createRequire(import.meta.url);
const IO_PACKAGES: Record<TestClientName, string> = {
  ioredis5: 'ioredis',
  ioredis6: 'ioredis6',
  iovalkey: 'iovalkey',
  'node-redis': 'ioredis',
  'node-redis5': 'ioredis',
};

/** ioredis 5, ioredis 6 or iovalkey: one interface (typed as ioredis 5's). */
export const IoRedis = require(IO_PACKAGES[TEST_CLIENT]) as typeof import('ioredis');

/** The node-redis package of `name` (`redis` is v6, `redis5` v5). */
export interface NodeRedisModule {
  createClient(options: { url: string }): any;
  createCluster(options: { rootNodes: { url: string }[] }): any;
}
export function nodeRedisModule(version: 5 | 6 = TEST_CLIENT === 'node-redis5' ? 5 : 6): NodeRedisModule {
  return require(version === 5 ? 'redis5' : 'redis') as NodeRedisModule;
}

/** A connected node-redis client of `url` (errors absorbed: fault tests cause them). */
export async function nodeRedisClient(url: string, version?: 5 | 6): Promise<NodeRedisClient> {
  const client = nodeRedisModule(version).createClient({ url });
  client.on('error', () => {});
  await client.connect();
  return client as NodeRedisClient;
}

/** The client the library is given in tests: the selected one, connected to `url`. */
export async function libraryClient(url: string): Promise<RedisClient> {
  if (NODE_REDIS_SELECTED) return nodeRedisClient(url);
  const client = new IoRedis.Redis(url);
  client.on('error', () => {});
  await client.ping();
  return client;
}

/**
 * The cluster client the library is given in tests: node-redis's `createCluster` (connected
 * here) when node-redis is selected, else an `IoRedis.Cluster`, both over `nodes`.
 */
export async function libraryClusterClient(nodes: { host: string; port: number }[]): Promise<RedisClient> {
  if (NODE_REDIS_SELECTED) {
    const client = nodeRedisModule().createCluster({ rootNodes: nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
    client.on('error', () => {});
    await client.connect();
    return client as RedisClient;
  }
  const client = new IoRedis.Cluster(nodes);
  client.on('error', () => {});
  await client.ping();
  return client as unknown as RedisClient;
}

/** Closes a client made by `libraryClient` or `nodeRedisClient`. */
export async function closeLibraryClient(client: RedisClient): Promise<void> {
  const c = client as { destroy?: () => void; disconnect?: () => void; isOpen?: boolean };
  if ('isOpen' in c) {
    if (c.isOpen) c.destroy?.();
    return;
  }
  c.disconnect?.();
}
