import { toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { checkRedisOption, resolveReplication, type RedisClient, type Replication, type ReplicasOption } from '../store/open-store.js';
import { validatePrefix } from '../lock/common.js';
import { defaultSerializer, type Serializer } from '../store/serializer.js';
import { resolveJitter } from '../store/jitter.js';
import { resolveCompression, type CompressionOptions, type ResolvedCompression } from '../store/compression.js';
import { FRESHNESS_DEFAULTS, FRESHNESS_OPTION_NAMES, resolveFreshness, type FreshnessOptions, type FreshnessRules } from './freshness.js';

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

/** The fields of `CacheOptions`: any other is refused. */
export const CACHE_OPTION_NAMES: ReadonlySet<string> = new Set([
  'redis', 'prefix', 'l1', 'maxEntries', 'lockTtl', 'waitTimeout', 'onWaitTimeout', 'onRemoteError', 'commandTimeout',
  'backendCooldown', 'inlineMax', 'serializer', 'hitForMissTtl', 'replicas', 'replicaTimeout', 'tagStampTtl', 'jitter', 'autoRecovery', 'compression', ...FRESHNESS_OPTION_NAMES,
]);

const L1_OPTION_NAMES: ReadonlySet<string> = new Set(['max', 'ttl', 'maxSize']);

/** `autoRecovery`: off, or the queue's bound. */
function resolveAutoRecovery(value: unknown): { maxQueue: number } | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return { maxQueue: CACHE_DEFAULTS.autoRecoveryMaxQueue };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionError('autoRecovery', `expected true, false or { maxQueue }, got ${value === null ? 'null' : typeof value}`);
  }
  checkKnownOptions(value, ['maxQueue'], 'autoRecovery.');
  const { maxQueue } = value as { maxQueue?: unknown };
  return { maxQueue: maxQueue === undefined ? CACHE_DEFAULTS.autoRecoveryMaxQueue : positiveInt(maxQueue, 'autoRecovery.maxQueue') };
}

function positiveInt(value: unknown, option: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new InvalidOptionError(option, `must be a positive integer, got ${String(value)}`);
  }
  return value;
}

export function resolveCacheOptions(options: CacheOptions | undefined): ResolvedCacheOptions {
  const o = options ?? {};
  if (typeof o !== 'object' || o === null) throw new InvalidOptionError('options', 'expected an object');
  if (Array.isArray(o)) throw new InvalidOptionError('options', 'expected an object, got an array');
  checkKnownOptions(o, CACHE_OPTION_NAMES);
  checkRedisOption(o.redis, false);
  let l1: ResolvedCacheOptions['l1'];
  if (o.l1 === true) l1 = { max: CACHE_DEFAULTS.l1Max, ttl: CACHE_DEFAULTS.l1Ttl };
  else if (o.l1 && typeof o.l1 === 'object' && !Array.isArray(o.l1)) {
    checkKnownOptions(o.l1, L1_OPTION_NAMES, 'l1.');
    l1 = {
      max: o.l1.max === undefined ? CACHE_DEFAULTS.l1Max : positiveInt(o.l1.max, 'l1.max'),
      ttl: o.l1.ttl === undefined ? CACHE_DEFAULTS.l1Ttl : toMs(o.l1.ttl, 'l1.ttl'),
    };
    if (o.l1.maxSize !== undefined) l1.maxSize = positiveInt(o.l1.maxSize, 'l1.maxSize');
  } else if (o.l1 !== undefined && o.l1 !== false) throw new InvalidOptionError('l1', 'expected true, false or { max, ttl, maxSize }');
  checkThrowOrLoad(o.onWaitTimeout, 'onWaitTimeout');
  checkThrowOrLoad(o.onRemoteError, 'onRemoteError');
  const serializer = o.serializer ?? defaultSerializer;
  if (typeof serializer !== 'object' || typeof serializer.serialize !== 'function' || typeof serializer.deserialize !== 'function') {
    throw new InvalidOptionError('serializer', 'expected an object with serialize(value) and deserialize(bytes)');
  }
  const compression = resolveCompression(o.compression);
  const commandTimeout = o.commandTimeout === undefined ? CACHE_DEFAULTS.commandTimeout : toMs(o.commandTimeout, 'commandTimeout');
  const replication = resolveReplication(o.replicas, o.replicaTimeout);
  if (replication) checkRedisOption(o.redis, true);
  if (replication && replication.timeout >= commandTimeout) {
    throw new InvalidOptionError('replicaTimeout', `must be shorter than commandTimeout (${commandTimeout} ms), got ${replication.timeout} ms`);
  }
  return {
    redis: o.redis,
    prefix: o.prefix === undefined ? CACHE_DEFAULTS.prefix : validatePrefix(o.prefix),
    l1,
    maxEntries: o.maxEntries === undefined ? CACHE_DEFAULTS.maxEntries : positiveInt(o.maxEntries, 'maxEntries'),
    lockTtl: o.lockTtl === undefined ? CACHE_DEFAULTS.lockTtl : toMs(o.lockTtl, 'lockTtl'),
    waitTimeout: o.waitTimeout === undefined ? CACHE_DEFAULTS.waitTimeout : toMs(o.waitTimeout, 'waitTimeout'),
    onWaitTimeout: o.onWaitTimeout ?? CACHE_DEFAULTS.onWaitTimeout,
    onRemoteError: o.onRemoteError ?? CACHE_DEFAULTS.onRemoteError,
    commandTimeout,
    backendCooldown: o.backendCooldown === undefined ? CACHE_DEFAULTS.backendCooldown : toMs(o.backendCooldown, 'backendCooldown', { allowZero: true }),
    inlineMax: o.inlineMax === undefined ? CACHE_DEFAULTS.inlineMax : positiveInt(o.inlineMax, 'inlineMax'),
    serializer,
    hitForMissTtl: o.hitForMissTtl === undefined ? CACHE_DEFAULTS.hitForMissTtl : toMs(o.hitForMissTtl, 'hitForMissTtl', { allowZero: true }),
    replication,
    freshness: resolveFreshness(o, FRESHNESS_DEFAULTS),
    tagStampTtl: o.tagStampTtl === undefined ? CACHE_DEFAULTS.tagStampTtl : toMs(o.tagStampTtl, 'tagStampTtl'),
    jitter: o.jitter === undefined ? CACHE_DEFAULTS.jitter : resolveJitter(o.jitter),
    autoRecovery: resolveAutoRecovery(o.autoRecovery),
    ...(compression === undefined ? {} : { compression }),
  };
}

/** `'throw' | 'load'` options (`onWaitTimeout`, `onRemoteError`): anything else is an `InvalidOptionError`. */
export function checkThrowOrLoad(value: unknown, option: string): void {
  if (value !== undefined && value !== 'throw' && value !== 'load') {
    throw new InvalidOptionError(option, `expected 'throw' or 'load', got ${String(value)}`);
  }
}
