/** The `Backend` contract (test/support/backend-contract.ts), run by every backend. */
import { encodeEntry } from '../src/core/entry.js';
import { cacheKeys, valueKey } from '../src/core/key.js';
import { v8Serializer } from '../src/core/serializer.js';
import { MemoryBackend } from '../src/store/memory-backend.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import type { StoredEntry } from '../src/store/types.js';
import { backendContract } from './support/backend-contract.js';
import { useRedis } from './support/use-redis.js';

const encode = (e: StoredEntry) => encodeEntry(e.kind, e.createdAt, e.ttl, v8Serializer.serialize(e.value));

backendContract('MemoryBackend', { distributed: false, storeAccess: false }, async () => {
  const backend = new MemoryBackend(1_000);
  return { backend, encode, close: () => backend.close() };
});

const server = useRedis();
const PREFIX = 'contract';
const INLINE_MAX = 512;

backendContract('RedisBackend', { distributed: true, storeAccess: true }, async () => {
  const redis = server.client();
  const backend = new RedisBackend(redis, { prefix: PREFIX, serializer: v8Serializer, inlineMax: INLINE_MAX, ownsClient: false });
  return {
    backend,
    encode,
    inlineMax: INLINE_MAX,
    raw: {
      writeValue: async (key, bytes) => void (await redis.set(valueKey(PREFIX, key), bytes)),
      writeWrongType: async (key) => void (await redis.rpush(valueKey(PREFIX, key), 'a list')),
      writeLockWithoutExpiry: async (key, token) => void (await redis.set(cacheKeys(PREFIX, key).lock, token)),
      lockTtl: (key) => redis.pttl(cacheKeys(PREFIX, key).lock),
    },
    close: () => backend.close(),
  };
});
