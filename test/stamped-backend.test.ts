/**
 * The backend the core sees (`StampedBackend`: a store seen through its entries' stamps) keeps
 * the contract of each role it plays (test/support/backend-contract.ts): the entry store and the
 * miss coordinator, as the bare stores do, and invalidation.
 */
import { commandClient } from '../src/redis/client.js';
import { processNow } from '../src/shared/clock.js';
import { EntryCodec } from '../src/store/codec.js';
import { MemoryGenerations } from '../src/store/generations.js';
import { cacheKeys, valueKey } from '../src/store/key.js';
import { MemoryBackend } from '../src/store/memory-backend.js';
import { RedisBackend } from '../src/store/redis-backend.js';
import { RedisTagStamps } from '../src/store/redis-tags.js';
import { v8Serializer } from '../src/store/serializer.js';
import { StampedBackend } from '../src/store/stamped-backend.js';
import type { TagStamps } from '../src/store/types.js';
import { backendContract, invalidationContract, type BackendHarness } from './support/backend-contract.js';
import { useRedis } from './support/use-redis.js';

const codec = () => new EntryCodec(v8Serializer);
/** A namespace's chain: judged by the root's generation and its own (the one `clear` stamps). */
const CHAIN = ['/', '/ns'];
const rules = (stamps: TagStamps) => ({ generations: CHAIN, stamps, jitter: 0, tagStampTtl: 24 * 3600_000 });

function memoryHarness(): BackendHarness & { backend: StampedBackend } {
  const stamps = new MemoryGenerations(processNow);
  const backend = new StampedBackend(new MemoryBackend(1_000, codec()), rules(stamps));
  return { backend, close: async () => (await backend.close(), stamps.close()) };
}

backendContract('StampedBackend over MemoryBackend', { distributed: false, storeAccess: false, peekLayer: 'store' }, async () => memoryHarness());
invalidationContract('StampedBackend over MemoryBackend', async () => memoryHarness());

const server = useRedis();
const L1_TTL = 1000;

async function redisHarness(prefix: string): Promise<BackendHarness & { backend: StampedBackend }> {
  const redis = server.client();
  const client = await server.libraryClient();
  const stamps = new RedisTagStamps(client, commandClient(client), `${prefix}:g`);
  const backend = new StampedBackend(new RedisBackend(client, { prefix, codec: codec(), inlineMax: 512, l1: { max: 1_000, ttl: L1_TTL } }), rules(stamps));
  return {
    backend,
    inlineMax: 512,
    raw: {
      writeValue: async (key, bytes) => void (await redis.set(valueKey(prefix, key), bytes)),
      writeWrongType: async (key) => void (await redis.rpush(valueKey(prefix, key), 'a list')),
      writeLockWithoutExpiry: async (key, token) => void (await redis.set(cacheKeys(prefix, key).lock, token)),
      lockTtl: (key) => redis.pttl(cacheKeys(prefix, key).lock),
    },
    close: async () => {
      await backend.close();
      stamps.close();
    },
  };
}

backendContract('StampedBackend over RedisBackend with an L1', { distributed: true, storeAccess: true, peekLayer: 'l1', l1Ttl: L1_TTL }, () => redisHarness('stamped'));
invalidationContract('StampedBackend over RedisBackend with an L1', () => redisHarness('stamped-invalidation'));
