/**
 * `useRedis()`: a throwaway Redis server for the test file (or the `describe`) it is called
 * in, started before its tests and stopped after them, with every client made by
 * `client()` closed then:
 *
 *   const server = useRedis();
 *   it('...', async () => { const redis = server.client(); ...server.url... });
 *
 * `port`, `url` and `client()` work inside tests and hooks (after the server started).
 */
import { afterAll, beforeAll } from 'vitest';
import { RedisServer, RedisTestCluster, type ClusterSetup, type StartRedisOptions } from '../../tools/redis-server.js';

export function useRedis(options: StartRedisOptions = {}): RedisServer {
  const server = new RedisServer(options);
  beforeAll(() => server.start());
  afterAll(() => server.stop());
  return server;
}

/** A Redis Cluster of `masters` masters for the file, as `useRedis()`. */
export function useRedisCluster(masters = 3, setup: ClusterSetup = {}): RedisTestCluster {
  const cluster = new RedisTestCluster(masters, setup);
  beforeAll(() => cluster.start());
  afterAll(() => cluster.stop());
  return cluster;
}
