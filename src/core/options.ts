import type { Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { duration, durationOrZero, oneOf, optionNames, positiveInt, resolveOptions, switchOrTable, type Check, type OptionTable } from '../shared/option-table.js';
import { checkRedisOption, checkReplicas, DEFAULT_REPLICA_TIMEOUT_MS, type RedisClient, type Replication, type ReplicasOption } from '../store/open-store.js';
import { validatePrefix } from '../lock/common.js';
import { defaultSerializer, type Serializer } from '../store/serializer.js';
import { resolveJitter } from '../store/jitter.js';
import { compressionCheck, type CompressionOptions, type ResolvedCompression } from '../store/compression.js';
import { freshnessRules, FRESHNESS_TABLE, type FreshnessOptions, type FreshnessRules } from './freshness.js';

/** The `serializer` option's contract, for the optional serializer entries (they sit over core, as the adapters do). */
export type { Serializer } from '../store/serializer.js';

export interface L1Options {
  /** Most entries kept in process memory. @default 1000 */
  max?: number;
  /** How long a value is served from process memory before Redis is asked again. @default 1000 (ms) */
  ttl?: Duration;
  /**
   * Most bytes kept in process memory, counted from the stored bytes of each entry (as
   * encoded, before any `compression`) plus its key; beside `max`, whichever is reached first evicts. An entry larger
   * than this is not kept. @default undefined (no byte bound)
   */
  maxSize?: number;
}

export interface CacheOptions extends FreshnessOptions {
  /**
   * An ioredis `Redis` or `Cluster` instance, or a `redis://` URL (then the cache creates the
   * client and closes it in `close()`). Without it the cache lives in this process
   * (lru-cache) and coalesces misses within the process only.
   */
  redis?: RedisClient | string;
  /** Namespace of every Redis key and channel. @default 'dogpile' */
  prefix?: string;
  /**
   * An in-process copy in front of Redis (only with `redis`): hits skip the round trip. Every
   * process hears of the others' writes, deletes and tag invalidations of the keys it holds
   * (pub/sub on the subscriber connection) and updates or drops its copy; `l1.ttl` bounds how
   * long a copy is served without asking Redis again. `true` = defaults.
   * @default false
   */
  l1?: boolean | L1Options;
  /** Entries kept by the in-process store when there is no `redis`. @default 10_000 */
  maxEntries?: number;
  /**
   * How long a leader's lock lives without renewal. The leader renews it every lockTtl/3
   * while the loader runs; if the leader dies, a waiter takes over after at most this long.
   * @default 5000 (ms)
   */
  lockTtl?: Duration;
  /**
   * How long a caller waits for another caller's loader (in this process or another) before
   * giving up; the caller whose loader runs waits for it as long as it takes.
   * @default 10_000 (ms)
   */
  waitTimeout?: Duration;
  /**
   * What a waiter does when `waitTimeout` passes: `'throw'` a `WaitTimeoutError`, or `'load'`
   * (run the loader itself, without the lock; its result is stored if cacheable).
   * @default 'throw'
   */
  onWaitTimeout?: 'throw' | 'load';
  /**
   * What a waiter does when the loader it waited for failed in another process (only its
   * error's name and message cross over): `'throw'` a `LoaderError` (code `E_LOADER`), or
   * `'load'` (run its own loader: once per key for the callers of this process that wait
   * together, without storing the result).
   * @default 'throw'
   */
  onRemoteError?: 'throw' | 'load';
  /**
   * Longest wait for one Redis round trip; past it the call goes on without Redis (the loader
   * runs with in-process single-flight) and a `backendError` event is emitted.
   * @default 1000 (ms)
   */
  commandTimeout?: Duration;
  /** After a Redis failure, calls skip Redis for this long before trying it again. @default 1000 (ms) */
  backendCooldown?: Duration;
  /** Values up to this many bytes travel inside the wake-up message to waiters. @default 65_536 */
  inlineMax?: number;
  /** How values become bytes in Redis (every process of a fleet needs the same). @default portableSerializer */
  serializer?: Serializer;
  /** How long a hit-for-miss marker (the last result was not cacheable) is kept. @default 0 (none) */
  hitForMissTtl?: Duration;
  /**
   * Replicas that must hold a lead before it counts (as `RedisLock`'s `replicas`): after the
   * lead is taken, `WAIT` asks for `'majority'` (half of the master's replicas, rounded up) or
   * that many, bounded by `replicaTimeout`; unconfirmed, the lead is released and the call
   * goes on as after a Redis failure (`backendError`, the loader runs in this process).
   * @default 0 (no wait)
   */
  replicas?: ReplicasOption;
  /** Longest `WAIT` for a lead's replicas; shorter than `commandTimeout`. @default 100 (ms) */
  replicaTimeout?: Duration;
  /**
   * How long a tag's invalidation is remembered (in Redis, one small key per invalidated tag).
   * An entry that carries tags lives at most this long: its `ttl` plus stale windows may not
   * exceed it (`InvalidOptionError`; a lifetime a loader's result decides is cut to it).
   * @default '7d'
   */
  tagStampTtl?: Duration;
  /**
   * Spreads each stored entry's `ttl` by up to this fraction either way (`0.1`: ±10%), drawn
   * per write, so that keys written together do not expire together. 0 ≤ jitter < 1.
   * @default 0
   */
  jitter?: number;
  /**
   * `delete`, `deleteMany`, `invalidateTags` and `clear` made while Redis is unreachable are
   * applied to this process's memory at once, kept in a bounded queue (`maxQueue`
   * invalidations, default 10 000) and replayed in order when Redis answers again; meanwhile
   * the cache does not read Redis. Without it they reject with `BackendError`.
   * @default false
   */
  autoRecovery?: boolean | { maxQueue?: number };
  /**
   * Stores values whose serialised bytes exceed `threshold` compressed, naming the algorithm in
   * the entry (every process reads them, whatever its own setting). `true` = defaults; only with
   * `redis`. See docs/compression.md.
   * @default false
   */
  compression?: boolean | CompressionOptions;
}

export interface ResolvedCacheOptions {
  redis: RedisClient | string | undefined;
  prefix: string;
  l1: { max: number; ttl: number; maxSize?: number } | undefined;
  maxEntries: number;
  lockTtl: number;
  waitTimeout: number;
  onWaitTimeout: 'throw' | 'load';
  onRemoteError: 'throw' | 'load';
  commandTimeout: number;
  backendCooldown: number;
  inlineMax: number;
  serializer: Serializer;
  hitForMissTtl: number;
  replication: Replication | undefined;
  /** staleWhileRevalidate, staleIfError, failSafeRetry, softTimeout, hardTimeout, earlyRefresh (ms; 0 = off). */
  freshness: FreshnessRules;
  tagStampTtl: number;
  jitter: number;
  /** `autoRecovery`: the queue's bound, or undefined when off. */
  autoRecovery: { maxQueue: number } | undefined;
  /** undefined: values are stored uncompressed. */
  compression?: ResolvedCompression | undefined;
}

export const CACHE_DEFAULTS = {
  prefix: 'dogpile',
  l1Max: 1000,
  l1Ttl: 1000,
  maxEntries: 10_000,
  lockTtl: 5000,
  waitTimeout: 10_000,
  onWaitTimeout: 'throw',
  onRemoteError: 'throw',
  commandTimeout: 1000,
  backendCooldown: 1000,
  inlineMax: 65_536,
  hitForMissTtl: 0,
  tagStampTtl: 7 * 24 * 3600 * 1000,
  jitter: 0,
  autoRecoveryMaxQueue: 10_000,
} as const;

/** How a `serializer` is checked: an object with `serialize` and `deserialize`. */
const serializerCheck: Check<Serializer> = (value, option) => {
  const serializer = value as Partial<Serializer> | null;
  if (typeof serializer !== 'object' || serializer === null || typeof serializer.serialize !== 'function' || typeof serializer.deserialize !== 'function') {
    throw new InvalidOptionError(option, 'expected an object with serialize(value) and deserialize(bytes)');
  }
  return value as Serializer;
};

/** `'throw' | 'load'` options (`onWaitTimeout`, `onRemoteError`). */
export const throwOrLoad = oneOf('throw', 'load');

/** `l1: { ... }`, declared once. */
export const L1_TABLE = {
  max: { default: CACHE_DEFAULTS.l1Max, check: positiveInt, shown: '`1000`', doc: 'most entries kept in process memory' },
  ttl: { default: CACHE_DEFAULTS.l1Ttl, check: duration, shown: '`1000` ms', doc: 'how long a copy is served before Redis is asked again' },
  maxSize: { check: positiveInt, shown: 'none', doc: 'most bytes kept in process memory (stored bytes plus keys)' },
} satisfies OptionTable<L1Options>;

/** `autoRecovery: { ... }`, declared once. */
export const AUTO_RECOVERY_TABLE = {
  maxQueue: { default: CACHE_DEFAULTS.autoRecoveryMaxQueue, check: positiveInt, shown: '`10000`', doc: 'most invalidations queued while Redis is unreachable' },
} satisfies OptionTable<{ maxQueue?: number }>;

/** The options of `createCache()`, declared once (docs/options.md shows them). */
export const CACHE_TABLE = {
  redis: {
    check: (value, option) => {
      checkRedisOption(value, false, option);
      return value as RedisClient | string;
    },
    shown: 'none',
    doc: 'a Redis client or a `redis://` URL; without it the cache lives in this process',
  },
  prefix: { default: CACHE_DEFAULTS.prefix, check: validatePrefix, shown: "`'dogpile'`", doc: 'namespace of every Redis key and channel' },
  l1: { check: switchOrTable(L1_TABLE), shown: '`false`', doc: 'an in-process copy in front of Redis, kept coherent across processes' },
  maxEntries: { default: CACHE_DEFAULTS.maxEntries, check: positiveInt, shown: '`10000`', doc: 'entries kept by the in-process store when there is no `redis`' },
  lockTtl: { default: CACHE_DEFAULTS.lockTtl, check: duration, shown: '`5000` ms', doc: "lifetime of a leader's lock without renewal" },
  waitTimeout: { default: CACHE_DEFAULTS.waitTimeout, check: duration, shown: '`10000` ms', doc: "longest wait for another caller's loader" },
  onWaitTimeout: { default: CACHE_DEFAULTS.onWaitTimeout, check: throwOrLoad, shown: "`'throw'`", doc: 'what a waiter does when `waitTimeout` passes' },
  onRemoteError: { default: CACHE_DEFAULTS.onRemoteError, check: throwOrLoad, shown: "`'throw'`", doc: 'what a waiter does when the loader failed in another process' },
  commandTimeout: { default: CACHE_DEFAULTS.commandTimeout, check: duration, shown: '`1000` ms', doc: 'longest wait for one Redis round trip' },
  backendCooldown: { default: CACHE_DEFAULTS.backendCooldown, check: durationOrZero, shown: '`1000` ms', doc: 'after a Redis failure, calls skip Redis for this long' },
  inlineMax: { default: CACHE_DEFAULTS.inlineMax, check: positiveInt, shown: '`65536` bytes', doc: 'values up to this many bytes travel inside the wake-up message' },
  serializer: { default: defaultSerializer, check: serializerCheck, shown: '`portableSerializer`', doc: 'how values become bytes in Redis' },
  hitForMissTtl: { default: CACHE_DEFAULTS.hitForMissTtl, check: durationOrZero, shown: '`0`', doc: 'how long a hit-for-miss marker is kept' },
  replicas: { default: 0, check: checkReplicas, shown: '`0`', doc: 'replicas that must hold a lead before it counts' },
  replicaTimeout: { default: DEFAULT_REPLICA_TIMEOUT_MS, check: duration, shown: '`100` ms', doc: "longest `WAIT` for a lead's replicas" },
  tagStampTtl: { default: CACHE_DEFAULTS.tagStampTtl, check: duration, shown: "`'7d'`", doc: "how long a tag's invalidation is remembered" },
  jitter: { default: CACHE_DEFAULTS.jitter, check: resolveJitter, shown: '`0`', doc: "spreads each stored entry's `ttl` by up to this fraction either way" },
  autoRecovery: { check: switchOrTable(AUTO_RECOVERY_TABLE), shown: '`false`', doc: 'invalidations made while Redis is unreachable are queued and replayed' },
  compression: { check: compressionCheck, shown: '`false`', doc: 'values above a size are stored compressed' },
  ...FRESHNESS_TABLE,
} satisfies OptionTable<CacheOptions>;

/** The fields of `CacheOptions`: any other is refused. */
export const CACHE_OPTION_NAMES: ReadonlySet<string> = new Set(optionNames(CACHE_TABLE));

export function resolveCacheOptions(options: CacheOptions | undefined): ResolvedCacheOptions {
  const o = resolveOptions(CACHE_TABLE, options);
  const freshness = freshnessRules(o);
  const replication: Replication | undefined = o.replicas === 0 ? undefined : { replicas: o.replicas, timeout: o.replicaTimeout };
  if (replication) checkRedisOption(o.redis, true);
  if (replication && replication.timeout >= o.commandTimeout) {
    throw new InvalidOptionError('replicaTimeout', `must be shorter than commandTimeout (${o.commandTimeout} ms), got ${replication.timeout} ms`);
  }
  return {
    redis: o.redis,
    prefix: o.prefix,
    l1: o.l1,
    maxEntries: o.maxEntries,
    lockTtl: o.lockTtl,
    waitTimeout: o.waitTimeout,
    onWaitTimeout: o.onWaitTimeout,
    onRemoteError: o.onRemoteError,
    commandTimeout: o.commandTimeout,
    backendCooldown: o.backendCooldown,
    inlineMax: o.inlineMax,
    serializer: o.serializer,
    hitForMissTtl: o.hitForMissTtl,
    replication,
    freshness,
    tagStampTtl: o.tagStampTtl,
    jitter: o.jitter,
    autoRecovery: o.autoRecovery,
    ...(o.compression === undefined ? {} : { compression: o.compression }),
  };
}
