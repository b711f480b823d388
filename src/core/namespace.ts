import { publishBackendError } from '../shared/diagnostics.js';
import { BackendError } from '../shared/errors.js';
import { bounded } from '../shared/wait.js';
import { boolean, nonEmptyString, optionsObject, resolveOptions, type OptionTable } from '../shared/option-table.js';
import { GENERATION_KEEP_MS, ROOT_GENERATION } from '../store/generations.js';
import { openBackend, openGenerations, openRedis, type RedisConnection } from '../store/open-store.js';
import type { Backend, TagStamps } from '../store/types.js';
import type { ClearOptions } from './types.js';
import type { CacheEmitter } from './events.js';
import type { ResolvedCacheOptions } from './options.js';

/** The longest namespace name, in characters. */
const MAX_NAMESPACE_LENGTH = 256;

/**
 * Where a cache lives: the root cache (made by `createCache`) or a namespace inside it. A cache
 * and its namespaces share the Redis client and one store of generation stamps; each has its
 * own key prefix (`<prefix>:n/<name>` for a namespace, `<prefix>:n/<name>/<inner>` nested), so
 * their keys, locks, channels and tags never meet, and its own chain of generations.
 */
export interface CacheScope {
  /** The cache's options, its `prefix` being where its keys live. */
  readonly options: ResolvedCacheOptions;
  /** The Redis connection the cache and its namespaces share (none: in process). */
  readonly connection: RedisConnection | undefined;
  /** True for the root cache: its backend closes the connection (a client made from a URL). */
  readonly closesConnection: boolean;
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
export function validateNamespaceName(name: unknown, option = 'name'): string {
  return NAMESPACE_NAME(name, option);
}

const NAMESPACE_NAME = nonEmptyString({ max: MAX_NAMESPACE_LENGTH, forbidden: ['/', '{', '}'] });

/** The scope of a cache made by `createCache(options)`: the client (made from a URL if one was given) and the generation stamps. */
export function rootScope(options: ResolvedCacheOptions): CacheScope {
  const connection = options.redis === undefined ? undefined : openRedis(options.redis);
  const stamps = openGenerations(connection, options.prefix);
  return { options, connection, closesConnection: true, stamps, generations: [ROOT_GENERATION], rootPrefix: options.prefix };
}

/** The scope of the namespace `name` inside `parent`. */
export function childScope(parent: CacheScope, name: string, detach: () => void): CacheScope {
  const own = parent.generations.length === 1 ? `/${name}` : `${parent.generations[parent.generations.length - 1]}/${name}`;
  return {
    options: { ...parent.options, prefix: `${parent.rootPrefix}:n${own}` },
    connection: parent.connection,
    closesConnection: false,
    stamps: parent.stamps,
    generations: [...parent.generations, own],
    rootPrefix: parent.rootPrefix,
    detach,
  };
}

/** The backend of a cache in `scope`: Redis or in process, seen through its stamps (tags and generations), TTLs spread. */
export function scopedBackend(scope: CacheScope): Backend {
  return openBackend(scope.connection, scope.closesConnection, scope.options, scope);
}

/** `clear()`'s options, declared once. */
export const CLEAR_TABLE = {
  stale: { default: false, check: boolean, doc: 'make the entries stale instead of a miss' },
} satisfies OptionTable<ClearOptions>;

/** `clear()`'s options, checked (`InvalidOptionError` naming the option): whether to mark stale. */
export function clearStale(options: unknown): boolean {
  return options === undefined ? false : resolveOptions(CLEAR_TABLE, optionsObject(options)).stale;
}

/**
 * Writes the cache's generation stamp, bounded by `commandTimeout`; a failure is reported as
 * `backendError` (operation `clear`) and rejects with `BackendError`.
 */
export async function clearScope(backend: Backend, stale: boolean, commandTimeout: number, events: CacheEmitter): Promise<void> {
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
