import { toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError, SerializationError } from '../shared/errors.js';
import { EntryKind } from '../store/entry.js';
import { validateTags } from '../shared/tag-names.js';
import type { Backend, StoredEntry } from '../store/types.js';
import { checkTaggedLifetime, setArguments } from './call-options.js';
import { validateKey } from '../shared/keys.js';
import type { CacheEmitter } from './events.js';
import { expiresAt, isFreshNow, staleWindow } from './freshness.js';
import type { GuardedBackend } from './guarded-backend.js';
import type { FreshnessHints } from './hints.js';
import type { ResolvedCacheOptions } from './options.js';
import type { SetOptions } from './types.js';

/**
 * The most keys one chunk of a bulk write carries (`setMany`, `deleteMany`, and the replay of a
 * `deleteMany` queued by `autoRecovery`): a chunk is sent at once and bounded by one deadline
 * (`commandTimeout`); the next is sent once it is answered.
 */
export const CHUNK_KEYS = 500;

/**
 * Sends `items` chunk after chunk, each by one call of `send` (one deadline). A chunk that fails
 * rejects `run()` with its failure, and the next `run()` resumes at that chunk: the chunks that
 * landed are not sent again (what `autoRecovery` replays). It resumes with a chunk half the size
 * of the one that failed, down to one item, and grows back (doubling, up to `CHUNK_KEYS`) with
 * each chunk answered: a chunk may outlast `commandTimeout` on a slow Redis, one key is a single
 * command, and one that gets no answer in time means what it means for any command (the guarded
 * backend's rule: Redis is unreachable, skipped for `backendCooldown`).
 */
class Chunks<T> {
  /** The first item not yet answered. */
  private at = 0;
  private size = CHUNK_KEYS;

  constructor(
    private readonly items: readonly T[],
    private readonly send: (chunk: readonly T[]) => Promise<void>,
  ) {}

  async run(): Promise<void> {
    while (this.at < this.items.length) {
      const chunk = this.items.slice(this.at, this.at + this.size);
      try {
        await this.send(chunk);
      } catch (error) {
        this.size = Math.max(1, Math.floor(chunk.length / 2));
        throw error;
      }
      this.at += chunk.length;
      this.size = Math.min(CHUNK_KEYS, this.size * 2);
    }
  }
}

/** One entry of `setMany`. */
export interface SetManyEntry<T = unknown> {
  key: string;
  value: T;
  /** How long it stays cached; else `setMany`'s `ttl`. */
  ttl?: Duration;
  /** Its tags (`invalidateTags`), added to `setMany`'s `tags`. */
  tags?: readonly string[];
}

/** `setMany`'s options: what applies to every entry that does not say otherwise. */
export interface SetManyOptions {
  ttl?: Duration;
  tags?: readonly string[];
}

/** What the bulk calls use of the cache. */
export interface BulkHost {
  readonly backend: Backend;
  readonly guarded: GuardedBackend;
  readonly hints: FreshnessHints;
  readonly options: ResolvedCacheOptions;
  readonly events: CacheEmitter;
  readonly clock: () => number;
  assertOpen(): void;
  /** `key` was written or deleted: later callers join no run or stale answer from before. */
  wrote(key: string): void;
  /** Called before a write: invalidations kept during an outage are replayed first (`autoRecovery`). */
  beforeWrite(): Promise<void>;
}

/** `set`; with `computedFor` (ms), a value computed for that long, stored like a loader's (see `setComputed`). */
export async function storeOne<T>(host: BulkHost, key: string, value: T, ttlOrOptions: Duration | SetOptions, computedFor: number | undefined, revalidate?: number): Promise<void> {
  validateKey(key);
  const { ttl, tags } = setArguments(ttlOrOptions);
  // `revalidate`: the value's own staleWhileRevalidate window (ms), in place of the cache's windows.
  const rules = revalidate === undefined ? host.options.freshness : { ...host.options.freshness, staleWhileRevalidate: revalidate, staleIfError: 0 };
  const stale = staleWindow(rules);
  if (tags) checkTaggedLifetime(ttl, rules, host.options.tagStampTtl);
  host.assertOpen();
  // Created at the store's time (Redis stamps it again with its own when it stores it).
  const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: host.backend.now(), ttl, stale };
  if (revalidate !== undefined) {
    entry.revalidate = revalidate;
    entry.staleIfError = 0;
  }
  // A value computed by a handler (the HTTP layer says how long it ran) stores like a
  // loader's value; any other set is the application's write, newer than every run begun before.
  if (tags) {
    entry.tags = tags;
    entry.delta = computedFor ?? 0;
  }
  const write = computedFor === undefined;
  await host.beforeWrite();
  await host.guarded.set(key, entry, write);
  if (write) host.wrote(key);
  host.hints.remember(key, entry);
}

/** When the value stored under `key` stops being served: its `ttl`'s end, or its own revalidate window's; undefined for none. */
export async function servedUntil(host: BulkHost, key: string): Promise<number | undefined> {
  validateKey(key);
  host.assertOpen();
  const found = await readOne(host, key);
  if (found === undefined || 'corrupt' in found || found.kind !== EntryKind.Value) return undefined;
  const until = expiresAt(found) + (found.revalidate ?? 0);
  return host.clock() < until || !found.stale ? until : undefined;
}

/** Checks a list of keys (`InvalidOptionError` naming `keys`): an array of non-empty strings. */
export function validateKeys(keys: unknown): readonly string[] {
  if (!Array.isArray(keys)) throw new InvalidOptionError('keys', `expected an array of keys, got ${keys === null ? 'null' : typeof keys}`);
  for (let i = 0; i < keys.length; i++) {
    const key: unknown = keys[i];
    if (typeof key !== 'string' || key.length === 0) throw new InvalidOptionError('keys', `key ${i} is ${typeof key === 'string' ? 'empty' : key === null ? 'null' : typeof key}; every key must be a non-empty string`);
  }
  return keys as readonly string[];
}

/**
 * The values of `keys`, in their order (`undefined` where there is none). Keys held fresh in
 * process memory are answered from it; the others are read from the store together: on Redis,
 * one `MGET` per `CHUNK_KEYS` keys, all sent at once (one round trip; on a cluster, one GET per
 * key), each entry then judged in one pass (stamps, freshness).
 */
export async function getMany<T>(host: BulkHost, keys: readonly string[]): Promise<(T | undefined)[]> {
  validateKeys(keys);
  host.assertOpen();
  const out: (T | undefined)[] = new Array<T | undefined>(keys.length);
  const missing: string[] = [];
  const at: number[] = [];
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const local = host.hints.freshInMemory(key);
    if (local !== undefined) out[i] = local.kind === EntryKind.Value ? (local.value as T) : undefined;
    else {
      missing.push(key);
      at.push(i);
    }
  }
  if (missing.length === 0) return out;
  const found = await readMany(host, missing);
  for (let j = 0; j < missing.length; j++) out[at[j]!] = storedValue<T>(host, missing[j]!, found[j]);
  return out;
}

/** What the store holds of `keys`, in their order: one `MGET` per `CHUNK_KEYS` keys, all sent at once, bounded by one deadline each. */
export async function readMany(host: Pick<BulkHost, 'guarded'>, keys: readonly string[]): Promise<(StoredEntry | { corrupt: Error } | undefined)[]> {
  if (keys.length <= CHUNK_KEYS) return host.guarded.getMany(keys);
  const reads: Promise<(StoredEntry | { corrupt: Error } | undefined)[]>[] = [];
  for (let from = 0; from < keys.length; from += CHUNK_KEYS) reads.push(host.guarded.getMany(keys.slice(from, from + CHUNK_KEYS)));
  return (await Promise.all(reads)).flat();
}

/**
 * The value of `key` read from the store (past the process's own copy), or undefined: a miss,
 * a marker, a value past its TTL, a corrupt value (reported) or a fault of this key alone.
 * What `get` does when process memory does not hold the key.
 */
export async function readStored<T>(host: BulkHost, key: string): Promise<T | undefined> {
  return storedValue<T>(host, key, await readOne(host, key));
}

/** What the store holds of `key`, past the process's own copy; a fault of this key alone is reported (`corrupt`) and read as nothing. */
async function readOne(host: BulkHost, key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
  try {
    return await host.guarded.get(key);
  } catch (error) {
    if (!host.guarded.keyFault(key, error)) throw error;
    return undefined;
  }
}

/** What a read found of `key`, as its value: a fresh value is remembered (freshness hint, L1); a corrupt one is reported; anything else is undefined. */
function storedValue<T>(host: BulkHost, key: string, found: StoredEntry | { corrupt: Error } | undefined): T | undefined {
  if (found === undefined) return undefined;
  if ('corrupt' in found) {
    host.events.emit('corrupt', { key, error: found.corrupt });
    return undefined;
  }
  if (found.kind !== EntryKind.Value || !isFreshNow(found, host.clock)) return undefined;
  host.hints.remember(key, found);
  return found.value as T;
}

/**
 * Checks every entry before anything is written (`InvalidOptionError` naming the entry's
 * option, `SerializationError` for a value that cannot be serialised), then stores them all,
 * each announced on its key's channel as `set` does: on Redis, one script per key, in chunks of
 * `CHUNK_KEYS` (each chunk's scripts sent before any reply is read: one round trip and one
 * deadline per chunk). Entries of one key are written in their order.
 */
export async function setMany(host: BulkHost, entries: readonly SetManyEntry[], options: SetManyOptions | undefined): Promise<void> {
  if (!Array.isArray(entries)) throw new InvalidOptionError('entries', `expected an array of { key, value, ttl?, tags? }, got ${entries === null ? 'null' : typeof entries}`);
  if (options !== undefined && (options === null || typeof options !== 'object')) throw new InvalidOptionError('options', 'expected { ttl?, tags? }');
  const defaultTtl = options?.ttl === undefined ? undefined : toMs(options.ttl, 'ttl');
  const defaultTags = options?.tags === undefined ? undefined : validateTags(options.tags);
  const stale = staleWindow(host.options.freshness);
  const prepared: { key: string; entry: StoredEntry }[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e: unknown = entries[i];
    const at = `entries[${i}]`;
    if (e === null || typeof e !== 'object') throw new InvalidOptionError(at, 'expected { key, value, ttl?, tags? }');
    const { key, value, ttl, tags } = e as SetManyEntry;
    if (typeof key !== 'string' || key.length === 0) throw new InvalidOptionError(`${at}.key`, `expected a non-empty string, got ${typeof key === 'string' ? 'an empty string' : key === null ? 'null' : typeof key}`);
    if (ttl === undefined && defaultTtl === undefined) throw new InvalidOptionError(`${at}.ttl`, "is required (or setMany's { ttl }): pass milliseconds or a string like '30s'");
    const ms = ttl === undefined ? defaultTtl! : toMs(ttl, `${at}.ttl`);
    const own = tags === undefined ? [] : validateTags(tags, `${at}.tags`);
    const all = [...new Set([...(defaultTags ?? []), ...own])];
    if (all.length > 0) {
      validateTags(all, `${at}.tags`);
      checkTaggedLifetime(ms, host.options.freshness, host.options.tagStampTtl);
    }
    try {
      const bytes = host.options.serializer.serialize(value);
      if (!(bytes instanceof Uint8Array)) throw new TypeError(`serialize() returned ${typeof bytes}, not a Buffer or Uint8Array`);
    } catch (error) {
      throw new SerializationError(`the value for "${key}" cannot be serialised: ${error instanceof Error ? error.message : String(error)}`, { key, cause: error });
    }
    const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt: 0, ttl: ms, stale };
    if (all.length > 0) {
      entry.tags = all;
      entry.delta = 0;
    }
    prepared.push({ key, entry });
  }
  host.assertOpen();
  await host.beforeWrite();
  const now = host.backend.now();
  for (const p of prepared) p.entry.createdAt = now;
  await new Chunks(prepared, async (chunk) => {
    await host.guarded.setChunk(chunk);
    for (const p of chunk) {
      host.wrote(p.key);
      host.hints.remember(p.key, p.entry);
    }
  }).run();
}

/**
 * The deletion of `keys` (checked by the caller), each delete announced on its key's channel
 * (every process drops its copy): on Redis, one script per key, in chunks of `CHUNK_KEYS` (one
 * round trip and one deadline per chunk). Each call sends what is left and resolves with how
 * many keys held a value; after a failure part way, the next call resumes at the chunk that
 * failed (see `Chunks`): what `autoRecovery` replays.
 */
export function deletion(host: BulkHost, keys: readonly string[]): () => Promise<number> {
  const unique = [...new Set(keys)];
  let deleted = 0;
  const chunks = new Chunks(unique, async (chunk) => {
    deleted += await host.guarded.deleteChunk(chunk);
    for (const key of chunk) host.wrote(key);
  });
  return async () => {
    host.assertOpen();
    for (const key of unique) host.hints.forget(key);
    await chunks.run();
    return deleted;
  };
}
