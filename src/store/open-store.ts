import { commandClient, type RedisClient } from '../redis/client.js';
import { checkRedisOption, connectRedis, openRedis, type RedisConnection } from '../redis/connection.js';
import type { Replication } from '../redis/replication.js';
import { processNow } from '../shared/clock.js';
import type { ResolvedCompression } from './compression.js';
import { EntryCodec } from './codec.js';
import { MemoryGenerations } from './generations.js';
import { tagKeys } from './key.js';
import { MemoryBackend } from './memory-backend.js';
import { RedisBackend } from './redis-backend.js';
import { RedisTagStamps } from './redis-tags.js';
import type { Serializer } from './serializer.js';
import { StampedBackend, type StampRules } from './stamped-backend.js';
import { parseStamp } from './tags.js';
import type { TagStamps } from './types.js';

/*
 * The store a cache opens, in one place: its connection (a client passed in, or made from a
 * URL and closed by the store), its generation stamps, and its backend (Redis or in process,
 * seen through its stamps: tags and generations, one rule; TTLs spread). The core sees these parts, not Redis.
 */

export type { RedisClient, RedisConnection, Replication };
export { checkRedisOption, connectRedis, openRedis };
export { checkReplicas, DEFAULT_REPLICA_TIMEOUT_MS, resolveReplication, type ReplicasOption } from '../redis/replication.js';
export { faultOf, type Fault } from '../redis/errors.js';

/** What a cache's options say of its store. */
interface StoreSettings {
  prefix: string;
  serializer: Serializer;
  maxEntries: number;
  inlineMax: number;
  l1: { max: number; ttl: number; maxSize?: number } | undefined;
  replication: Replication | undefined;
  /** The cache's `commandTimeout`: a write that reaches Redis later than this is refused there. */
  commandTimeout: number;
  jitter: number;
  tagStampTtl: number;
  /** Values above the threshold stored compressed (only with a connection); undefined: none. */
  compression?: ResolvedCompression | undefined;
}

/** Where the generation stamps of a cache and its namespaces live: `<prefix>:g:t:{/name}` (tag stamps under their own prefix). */
function generationPrefix(rootPrefix: string): string {
  return `${rootPrefix}:g`;
}

/** The generation stamps of a root cache and its namespaces (in process without a connection). */
export function openGenerations(connection: RedisConnection | undefined, rootPrefix: string): TagStamps {
  if (connection === undefined) return new MemoryGenerations(processNow);
  return new RedisTagStamps(connection.client, commandClient(connection.client), generationPrefix(rootPrefix));
}

/** Where a cache in a scope stands: its chain of generations, their stamps, the root's prefix. */
interface StoreScope {
  readonly generations: readonly string[];
  readonly stamps: TagStamps;
  readonly rootPrefix: string;
}

/**
 * The backend of a cache: Redis (closing the connection with it when `closes`) or in process,
 * seen through its stamps (tags and generations judged by one rule), TTLs spread.
 */
export function openBackend(connection: RedisConnection | undefined, closes: boolean, settings: StoreSettings, scope: StoreScope): StampedBackend {
  const codec = new EntryCodec(settings.serializer, connection === undefined ? undefined : settings.compression);
  const inner =
    connection === undefined
      ? new MemoryBackend(settings.maxEntries, codec)
      : new RedisBackend(connection.client, {
          prefix: settings.prefix,
          codec,
          inlineMax: settings.inlineMax,
          l1: settings.l1,
          closeClient: closes ? () => connection.close() : undefined,
          replication: settings.replication,
          writeTimeout: settings.commandTimeout,
        });
  const rules: StampRules = { generations: scope.generations, stamps: scope.stamps, jitter: settings.jitter, tagStampTtl: settings.tagStampTtl };
  if (connection !== undefined) {
    // One GET per stamp, for a read that finds a value before the stamps are followed here.
    const commands = commandClient(connection.client);
    const stampPrefix = generationPrefix(scope.rootPrefix);
    rules.readOnce = (names) => Promise.all(names.map(async (name) => parseStamp((await commands.getBuffer(tagKeys(stampPrefix, name).stamp))?.toString('latin1'))));
  }
  return new StampedBackend(inner, rules);
}
