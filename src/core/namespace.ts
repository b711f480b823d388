import { commandClient, createClientFromUrl, type RedisClient } from '../redis/client.js';
import { processNow } from '../shared/clock.js';
import { publishBackendError } from '../shared/diagnostics.js';
import { BackendError, InvalidOptionError } from '../shared/errors.js';
import { bounded } from '../shared/wait.js';
import { EntryCodec } from '../store/codec.js';
import { GENERATION_KEEP_MS, MemoryGenerations, ROOT_GENERATION } from '../store/generations.js';
import { MemoryBackend } from '../store/memory-backend.js';
import { RedisBackend } from '../store/redis-backend.js';
import { RedisTagStamps } from '../store/redis-tags.js';
import { ScopedBackend, type ScopeRules } from '../store/scoped-backend.js';
import { tagKeys } from '../store/key.js';
import { parseStamp } from '../store/tags.js';
import { TaggedBackend } from '../store/tagged-backend.js';
import type { TagStamps } from '../store/types.js';
import type { CacheEmitter } from './events.js';
import type { ResolvedCacheOptions } from './options.js';

/** The longest namespace name, in characters. */
export const MAX_NAMESPACE_LENGTH = 256;

/**
 * Where a cache lives: the root cache (made by `createCache`) or a namespace inside it. A cache
 * and its namespaces share the Redis client and one store of generation stamps; each has its
 * own key prefix (`<prefix>:n/<name>` for a namespace, `<prefix>:n/<name>/<inner>` nested), so
 * their keys, locks, channels and tags never meet, and its own chain of generations.
 */
export interface CacheScope {
  /** The cache's options, its `prefix` being where its keys live. */
  readonly options: ResolvedCacheOptions;
  readonly client: RedisClient | undefined;
  /** True for the root cache when it made the client from a URL (it closes it). */
  readonly ownsClient: boolean;
  /** The generation stamps of the root and every namespace (closed by the root). */
  readonly stamps: TagStamps;
  /** The generation names of the chain, root first (see store/generations.ts). */
  readonly generations: readonly string[];
  /** The root cache's prefix. */
  readonly rootPrefix: string;
  /** Called when a namespace is closed (its parent forgets it). */
  readonly detach?: () => void;
}

/** Checks a namespace name: a non-empty string without `/`, `{` or `}`, at most `MAX_NAMESPACE_LENGTH` characters. */
export function validateNamespaceName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new InvalidOptionError('name', `expected a non-empty string, got ${name === null ? 'null' : typeof name === 'string' ? 'an empty string' : typeof name}`);
  if (/[/{}]/.test(name)) throw new InvalidOptionError('name', `must not contain "/", "{" or "}", got ${JSON.stringify(name)}`);
  if (name.length > MAX_NAMESPACE_LENGTH) throw new InvalidOptionError('name', `is ${name.length} characters long; the limit is ${MAX_NAMESPACE_LENGTH}`);
  return name;
}

/** Where the generation stamps of a cache and its namespaces live: `<prefix>:g:t:{/name}` (tag stamps under their own prefix). */
function generationPrefix(rootPrefix: string): string {
  return `${rootPrefix}:g`;
}

/** The scope of a cache made by `createCache(options)`: the client (made from a URL if one was given) and the generation stamps. */
export function rootScope(options: ResolvedCacheOptions): CacheScope {
  const { redis } = options;
  const client = redis === undefined ? undefined : typeof redis === 'string' ? createClientFromUrl(redis) : redis;
  const stamps = client === undefined ? new MemoryGenerations(processNow) : new RedisTagStamps(client, commandClient(client), generationPrefix(options.prefix));
  return { options, client, ownsClient: typeof redis === 'string', stamps, generations: [ROOT_GENERATION], rootPrefix: options.prefix };
}

/** The scope of the namespace `name` inside `parent`. */
export function childScope(parent: CacheScope, name: string, detach: () => void): CacheScope {
  const own = parent.generations.length === 1 ? `/${name}` : `${parent.generations[parent.generations.length - 1]}/${name}`;
  return {
    options: { ...parent.options, prefix: `${parent.rootPrefix}:n${own}` },
    client: parent.client,
    ownsClient: false,
    stamps: parent.stamps,
    generations: [...parent.generations, own],
    rootPrefix: parent.rootPrefix,
    detach,
  };
}

/** The backend of a cache in `scope`: Redis or in process, tags checked, generations checked, TTLs spread. */
export function scopedBackend(scope: CacheScope): ScopedBackend {
  const o = scope.options;
  const codec = new EntryCodec(o.serializer, scope.client === undefined ? undefined : o.compression);
  const inner =
    scope.client === undefined
      ? new MemoryBackend(o.maxEntries, codec)
      : new RedisBackend(scope.client, {
          prefix: o.prefix,
          codec,
          inlineMax: o.inlineMax,
          l1: o.l1,
          ownsClient: scope.ownsClient,
          replication: o.replication,
          writeTimeout: o.commandTimeout,
        });
  const rules: ScopeRules = { generations: scope.generations, stamps: scope.stamps, jitter: o.jitter, tagStampTtl: o.tagStampTtl };
  const client = scope.client;
  if (client !== undefined) {
    // One GET per stamp, for a read that finds a value before the stamps are followed here.
    const commands = commandClient(client);
    const stampPrefix = generationPrefix(scope.rootPrefix);
    rules.readOnce = (names) => Promise.all(names.map(async (name) => parseStamp((await commands.getBuffer(tagKeys(stampPrefix, name).stamp))?.toString('latin1'))));
  }
  return new ScopedBackend(new TaggedBackend(inner), rules);
}

/** `clear()`'s options, checked (`InvalidOptionError` naming the option): whether to mark stale. */
export function clearStale(options: unknown): boolean {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'expected { stale?: boolean }');
  for (const name of Object.keys(options)) if (name !== 'stale') throw new InvalidOptionError(name, 'unknown option; clear() takes { stale?: boolean }');
  const stale = (options as { stale?: unknown }).stale;
  if (stale !== undefined && typeof stale !== 'boolean') throw new InvalidOptionError('stale', `expected a boolean, got ${typeof stale}`);
  return stale === true;
}

/**
 * Writes the cache's generation stamp, bounded by `commandTimeout`; a failure is reported as
 * `backendError` (operation `clear`) and rejects with `BackendError`.
 */
export async function clearScope(backend: ScopedBackend, stale: boolean, commandTimeout: number, events: CacheEmitter): Promise<void> {
  try {
    await bounded(backend.clear(stale, GENERATION_KEEP_MS), {
      ms: commandTimeout,
      onTimeout: () => {
        throw new BackendError(`Redis did not answer clear within ${commandTimeout} ms (commandTimeout)`);
      },
    });
  } catch (err) {
    const error = err instanceof BackendError ? err : new BackendError(`Redis clear failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    events.emit('backendError', { key: undefined, operation: 'clear', error });
    publishBackendError(undefined, 'clear', error);
    throw error;
  }
}
