/** The `Backend` contract (test/support/backend-contract.ts), run by every backend. */
import { EntryCodec } from '../src/store/codec.js';
import { cacheKeys, valueKey } from '../src/store/key.js';
import { MemoryBackend } from '../src/store/memory-backend.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import { v8Serializer } from '../src/store/serializer.js';
import { backendContract, type BackendHarness } from './support/backend-contract.js';
import { useRedis } from './support/use-redis.js';
import type { RedisClient } from '../src/redis/client.js';
import { closeLibraryClient, nodeRedisClient, TEST_CLIENT } from '../tools/test-client.js';

const codec = () => new EntryCodec(v8Serializer);

backendContract('MemoryBackend', { distributed: false, storeAccess: false, peekLayer: 'store' }, async () => {
  const backend = new MemoryBackend(1_000, codec());
  return { backend, close: () => backend.close() };
});

const server = useRedis();
const PREFIX = 'contract';
const INLINE_MAX = 512;
/** Long enough that the contract's order check (a 30 ms copy goes before an L1-ttl one) cannot be decided by a stalled loop. */
const L1_TTL = 1000;

/**
 * The backend runs on `client` (by default the client the tests hand to the library,
 * `DOGPILE_TEST_CLIENT`); the faults are written through a separate ioredis connection.
 */
async function redisHarness(prefix: string, l1: { max: number; ttl: number } | undefined, client?: RedisClient): Promise<BackendHarness> {
  const redis = server.client();
  const backend = new RedisBackend(client ?? (await server.libraryClient()), { prefix, codec: codec(), inlineMax: INLINE_MAX, l1 });
  return {
    backend,
    inlineMax: INLINE_MAX,
    raw: {
      writeValue: async (key, bytes) => void (await redis.set(valueKey(prefix, key), bytes)),
      writeWrongType: async (key) => void (await redis.rpush(valueKey(prefix, key), 'a list')),
      writeLockWithoutExpiry: async (key, token) => void (await redis.set(cacheKeys(prefix, key).lock, token)),
      lockTtl: (key) => redis.pttl(cacheKeys(prefix, key).lock),
    },
    close: async () => {
      await backend.close();
      if (client) await closeLibraryClient(client);
    },
  };
}

backendContract(`RedisBackend with an L1 (${TEST_CLIENT})`, { distributed: true, storeAccess: true, peekLayer: 'l1', l1Ttl: L1_TTL }, async () =>
  redisHarness(PREFIX, { max: 1_000, ttl: L1_TTL }),
);

backendContract(`RedisBackend without an L1 (${TEST_CLIENT})`, { distributed: true, storeAccess: true, peekLayer: 'l1' }, async () =>
  redisHarness(`${PREFIX}-no-l1`, undefined),
);

// node-redis 6 and 5 in every run, whichever client the rest of the suite uses.
for (const version of [6, 5] as const) {
  backendContract(`RedisBackend on node-redis ${version}`, { distributed: true, storeAccess: true, peekLayer: 'l1' }, async () =>
    redisHarness(`${PREFIX}-node-redis-${version}`, undefined, await nodeRedisClient(server.url, version)),
  );
}
