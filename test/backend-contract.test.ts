/** The `Backend` contract (test/support/backend-contract.ts), run by every backend. */
import { EntryCodec } from '../src/store/codec.js';
import { cacheKeys, valueKey } from '../src/store/key.js';
import { L1 } from '../src/store/l1.js';
import { MemoryBackend } from '../src/store/memory-backend.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import { v8Serializer } from '../src/store/serializer.js';
import { backendContract, type BackendHarness } from './support/backend-contract.js';
import { useRedis } from './support/use-redis.js';

const codec = () => new EntryCodec(v8Serializer);

backendContract('MemoryBackend', { distributed: false, storeAccess: false, peekLayer: 'store' }, async () => {
  const backend = new MemoryBackend(1_000, codec());
  return { backend, close: () => backend.close() };
});

const server = useRedis();
const PREFIX = 'contract';
const INLINE_MAX = 512;
const L1_TTL = 300;

function redisHarness(prefix: string, l1: L1 | undefined): BackendHarness {
  const redis = server.client();
  const backend = new RedisBackend(redis, { prefix, codec: codec(), inlineMax: INLINE_MAX, l1, ownsClient: false });
  return {
    backend,
    inlineMax: INLINE_MAX,
    raw: {
      writeValue: async (key, bytes) => void (await redis.set(valueKey(prefix, key), bytes)),
      writeWrongType: async (key) => void (await redis.rpush(valueKey(prefix, key), 'a list')),
      writeLockWithoutExpiry: async (key, token) => void (await redis.set(cacheKeys(prefix, key).lock, token)),
      lockTtl: (key) => redis.pttl(cacheKeys(prefix, key).lock),
    },
    close: () => backend.close(),
  };
}

backendContract('RedisBackend with an L1', { distributed: true, storeAccess: true, peekLayer: 'l1', l1Ttl: L1_TTL }, async () =>
  redisHarness(PREFIX, new L1(1_000, L1_TTL)),
);

backendContract('RedisBackend without an L1', { distributed: true, storeAccess: true, peekLayer: 'l1' }, async () => redisHarness(`${PREFIX}-no-l1`, undefined));
