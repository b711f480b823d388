import { describe, it } from 'vitest';
import { createClient, createCluster } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { Redis, Cluster } from 'ioredis';
import { Redis as Redis6, Cluster as Cluster6 } from 'ioredis6';
import { Redis as Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { createCache, RedisLock, withLock } from '../src/index.js';
import { DogpileModule } from '../src/nest/index.js';

// Only type-checked: every accepted client fits the `redis` option as its package types it.
describe('accepted clients', () => {
  it('ioredis 5 and 6, iovalkey, node-redis 5 and 6, clusters included', () => {
    const clients = [
      new Redis(),
      new Cluster([]),
      new Redis6(),
      new Cluster6([]),
      new Valkey(),
      new ValkeyCluster([]),
      createClient(),
      createCluster({ rootNodes: [] }),
      createClient5(),
      createCluster5({ rootNodes: [] }),
    ];
    createCache({ redis: createClient() });
    createCache({ redis: createCluster5({ rootNodes: [] }) });
    new RedisLock(createClient5(), 'job');
    new RedisLock(new Valkey(), 'job');
    void withLock('job', () => 1, { redis: createCluster({ rootNodes: [] }) });
    DogpileModule.forRoot({ redis: createClient() });
    DogpileModule.forRoot({ redis: new Redis6() });
    for (const redis of clients) createCache({ redis });
  });

  it('refuses what is no client', () => {
    // @ts-expect-error an object with a few Redis-like methods
    createCache({ redis: { get: async () => null, set: async () => 'OK' } });
    // @ts-expect-error a client's constructor, not a client
    new RedisLock(Redis, 'job');
  });
});
