import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { DogpileCache, LoaderContext } from '../../core/cache.js';
import { servedUntil } from '../../core/internal.js';
import { describe } from '../../shared/duration.js';
import { BackendError, InvalidOptionError } from '../../shared/errors.js';
import { checkKnownOptions } from '../../shared/known-options.js';
import type { CacheManagerDefaults } from './options.js';
import { durationOrZero } from '../../shared/option-table.js';
import { lifetime, storeFor } from './ttl.js';

/** A TTL (ms) or refresh threshold (ms), or a function of the value that returns one. */
type PerValue<T> = number | ((value: T) => number);

/** `wrap()`'s options object. */
export interface WrapOptions<T> {
  /** The TTL (ms), or a function of the value that returns it. */
  ttl?: number | ((value: T) => number);
  /** The refresh threshold (ms), or a function of the value that returns it. */
  refreshThreshold?: number | ((value: T) => number);
}

/** `wrap()`'s options with `raw: true`: it answers `{ value, expires }`. */
export type WrapOptionsRaw<T> = WrapOptions<T> & { raw: true };

/** What `wrap(..., { raw: true })` answers: the value and when it stops being served (ms since the epoch). */
export interface StoredDataRaw<T> {
  value?: T;
  expires?: number;
}

/** The events of the cache, with cache-manager 7's names and payloads. */
export interface CacheManagerEvents {
  get: <T>(data: { key: string; value?: T; error?: unknown }) => void;
  mget: <T>(data: { keys: string[]; value?: T[]; error?: unknown }) => void;
  set: <T>(data: { key: string; value: T; error?: unknown }) => void;
  mset: <T>(data: { list: { key: string; value: T; ttl?: number }[]; error?: unknown }) => void;
  del: (data: { key: string; error?: unknown }) => void;
  clear: (error?: unknown) => void;
  /** A value refreshed by `wrap()` inside its `refreshThreshold`, in the process that ran the refresh (with `error` when it failed). */
  refresh: <T>(data: { key: string; value: T; error?: unknown }) => void;
}

/**
 * cache-manager 7's `Cache`, on a `DogpileCache`: TTLs in ms, `wrap()` coalesced across every
 * process sharing the Redis. `stores` is empty: there are no Keyv stores.
 */
export interface CacheManager {
  get: <T>(key: string) => Promise<T | undefined>;
  mget: <T>(keys: string[]) => Promise<(T | undefined)[]>;
  ttl: (key: string) => Promise<number | undefined>;
  set: <T>(key: string, value: T, ttl?: number) => Promise<T>;
  mset: <T>(list: { key: string; value: T; ttl?: number }[]) => Promise<{ key: string; value: T; ttl?: number }[]>;
  del: (key: string) => Promise<boolean>;
  mdel: (keys: string[]) => Promise<boolean>;
  clear: () => Promise<boolean>;
  on: <E extends keyof CacheManagerEvents>(event: E, listener: CacheManagerEvents[E]) => EventEmitter;
  off: <E extends keyof CacheManagerEvents>(event: E, listener: CacheManagerEvents[E]) => EventEmitter;
  disconnect: () => Promise<undefined>;
  cacheId: () => string;
  stores: never[];
  wrap<T>(key: string, fnc: () => T | Promise<T>, ttl?: number | ((value: T) => number), refreshThreshold?: number | ((value: T) => number)): Promise<T>;
  wrap<T>(key: string, fnc: () => T | Promise<T>, options: WrapOptions<T>): Promise<T>;
  wrap<T>(key: string, fnc: () => T | Promise<T>, options: WrapOptionsRaw<T>): Promise<StoredDataRaw<T>>;
}

const WRAP_OPTIONS = ['ttl', 'refreshThreshold', 'raw'];

const perValue = <T>(given: PerValue<T> | undefined, value: T, option: string): number | undefined =>
  given === undefined ? undefined : durationOrZero(typeof given === 'function' ? given(value) : given, option);

/** A failure of the store, which `get`/`mget`/`ttl` answer as a miss (and an event), as cache-manager does. */
const storeFault = (error: unknown): boolean => error instanceof BackendError;

/**
 * The cache `CACHE_MANAGER` injects. `close` ends what the module created (called by
 * `disconnect()` and on application shutdown; a cache you passed in is left open).
 */
export function manageCache(cache: DogpileCache, defaults: CacheManagerDefaults, close: () => Promise<void>): CacheManager {
  const events = new EventEmitter();
  const id = defaults.cacheId ?? randomUUID();
  const ttlOf = (ttl: number | undefined): number => lifetime(ttl === undefined ? undefined : durationOrZero(ttl, 'ttl'), defaults.ttl);

  async function wrap<T>(key: string, fnc: () => T | Promise<T>, ttlOrOptions?: PerValue<T> | WrapOptions<T> | WrapOptionsRaw<T>, thresholdArg?: PerValue<T>): Promise<unknown> {
    if (typeof fnc !== 'function') throw new InvalidOptionError('fnc', `expected a function, got ${describe(fnc)}`);
    const object = typeof ttlOrOptions === 'object' && ttlOrOptions !== null;
    if (object) checkKnownOptions(ttlOrOptions, WRAP_OPTIONS);
    const options: WrapOptions<T> & { raw?: boolean } = object ? ttlOrOptions : { ttl: ttlOrOptions as PerValue<T> | undefined, refreshThreshold: thresholdArg };
    const { ttl, refreshThreshold } = options;
    // Known before the run when neither is a function of the value: the call states the window.
    const planned = storeFor(
      lifetime(typeof ttl === 'number' ? durationOrZero(ttl, 'ttl') : undefined, defaults.ttl),
      typeof refreshThreshold === 'number' ? durationOrZero(refreshThreshold, 'refreshThreshold') : defaults.refreshThreshold,
    );
    const loader = async (ctx: LoaderContext): Promise<T> => {
      let value: T;
      try {
        value = await fnc();
      } catch (error) {
        if (ctx.stale !== undefined) events.emit('refresh', { key, value: ctx.stale.value, error });
        throw error;
      }
      if (ctx.stale !== undefined) events.emit('refresh', { key, value });
      if (value === undefined) return value;
      ctx.decide(storeFor(lifetime(perValue(ttl, value, 'ttl'), defaults.ttl), perValue(refreshThreshold, value, 'refreshThreshold') ?? defaults.refreshThreshold));
      return value;
    };
    const result = await cache.resolve(key, loader, { ttl: planned.ttl, staleWhileRevalidate: planned.staleWhileRevalidate ?? 0 });
    if (options.raw !== true) return result.value;
    return { value: result.value, expires: (await servedUntil(cache, key).catch(() => undefined)) ?? result.createdAt + planned.ttl + (planned.staleWhileRevalidate ?? 0) };
  }

  /** Runs a write, telling listeners of `event` how it went; a failure rejects. */
  async function write<R>(event: string, data: Record<string, unknown>, run: () => Promise<R>): Promise<R> {
    try {
      const out = await run();
      events.emit(event, data);
      return out;
    } catch (error) {
      events.emit(event, { ...data, error });
      throw error;
    }
  }

  /** Runs a read, telling listeners of `event`; a failure of the store is a miss, as in cache-manager. */
  async function read<R>(event: string, data: Record<string, unknown>, run: () => Promise<R>, miss: R): Promise<R> {
    try {
      const value = await run();
      events.emit(event, { ...data, value });
      return value;
    } catch (error) {
      if (!storeFault(error)) throw error;
      events.emit(event, { ...data, error });
      return miss;
    }
  }

  let closing: Promise<void> | undefined;
  const manager: CacheManager = {
    get: <T>(key: string) => read('get', { key }, () => cache.get<T>(key), undefined),
    mget: <T>(keys: string[]) => read('mget', { keys }, () => cache.getMany<T>(keys), keys.map(() => undefined)),
    ttl: (key: string) => read('ttl', { key }, () => servedUntil(cache, key), undefined),
    set: <T>(key: string, value: T, ttl?: number) => write('set', { key, value }, async () => (await cache.set(key, value, ttlOf(ttl)), value)),
    mset: <T>(list: { key: string; value: T; ttl?: number }[]) => {
      if (!Array.isArray(list)) return Promise.reject(new InvalidOptionError('list', `expected an array of { key, value, ttl? }, got ${describe(list)}`));
      const resolved = list.map(({ key, value, ttl }) => ({ key, value, ttl: ttlOf(ttl) }));
      return write('mset', { list: resolved }, async () => (await cache.setMany(resolved), resolved));
    },
    del: (key: string) => write('del', { key }, async () => (await cache.delete(key), true)),
    mdel: (keys: string[]) => write('mdel', { keys }, async () => (await cache.deleteMany(keys), true)),
    clear: async () => {
      try {
        await cache.clear();
        events.emit('clear');
        return true;
      } catch (error) {
        events.emit('clear', error);
        throw error;
      }
    },
    on: (event, listener) => events.addListener(event, listener as (...args: unknown[]) => void),
    off: (event, listener) => events.removeListener(event, listener as (...args: unknown[]) => void),
    disconnect: async () => {
      closing ??= close();
      await closing;
      return undefined;
    },
    cacheId: () => id,
    stores: [],
    wrap: wrap as CacheManager['wrap'],
  };
  managed.set(manager, { cache, defaults });
  return manager;
}

/** The cache and defaults behind each cache `manageCache()` made (read by `CacheInterceptor`). */
const managed = new WeakMap<object, { cache: DogpileCache; defaults: CacheManagerDefaults }>();

/** The `DogpileCache` and defaults behind a cache made by `manageCache()`, or undefined for anything else. */
export function managedParts(manager: unknown): { cache: DogpileCache; defaults: CacheManagerDefaults } | undefined {
  return typeof manager === 'object' && manager !== null ? managed.get(manager) : undefined;
}
