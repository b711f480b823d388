import { isDuration, MAX_DURATION_MS, toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { validateKey } from '../shared/key-names.js';
import { MAX_TAG_LENGTH, MAX_TAGS, validateTags } from '../shared/tag-names.js';
import { FRESHNESS_OPTION_NAMES, resolveFreshness, staleWindow, type FreshnessRules } from './freshness.js';
import { checkThrowOrLoad, type ResolvedCacheOptions } from './options.js';
import type { CacheDecision, GetOrComputeOptions, InvalidateTagsOptions, Loader, SetOptions } from './types.js';

/** One call's options, with the cache's defaults applied. */
export interface CallOptions<T> {
  /** A caller that wins the lead of a stale value inside `staleWhileRevalidate` runs the refresh itself and waits for it (see `resolveInline` in internal.ts). */
  inlineRefresh?: boolean;
  /** A refresh no caller waits for (internal: traced as a background loader run). */
  background?: boolean;
  ttl: number;
  lockTtl: number;
  waitTimeout: number;
  onWaitTimeout: 'throw' | 'load';
  onRemoteError: 'throw' | 'load';
  signal: AbortSignal | undefined;
  /** Look past the stored value: run the loader (or join the run in flight). */
  forceRefresh?: boolean;
  cacheable: ((value: T) => CacheDecision) | undefined;
  hitForMissTtl: number;
  freshness: FreshnessRules;
  /** The call's tags (validated, no duplicates). */
  tags?: readonly string[] | undefined;
  /** The longest life of a tagged entry (the cache's `tagStampTtl`). */
  tagStampTtl: number;
  /** Told when this call waits for another caller's run instead of leading (how `getOrComputeMany` knows a key will not be led by it). */
  onJoin?: () => void;
}

/**
 * True when a call has plain, valid arguments (a key, a loader, a TTL) and so may take the
 * fast paths for hits without resolving its options. It accepts nothing that
 * `resolveCallOptions` would refuse; anything else goes through `resolveCallOptions`.
 */
export function isPlainCall(key: unknown, loader: unknown, ttlOrOptions: unknown): boolean {
  if (typeof key !== 'string' || key.length === 0 || typeof loader !== 'function') return false;
  if (isPlainTtl(ttlOrOptions)) return true;
  // `{ ttl, tags }` with valid tags (what `validateTags` accepts) is plain too.
  if (ttlOrOptions === null || typeof ttlOrOptions !== 'object') return false;
  const o = ttlOrOptions as { ttl?: unknown; tags?: unknown };
  let fields = 0;
  for (const name in o) {
    if (name !== 'ttl' && name !== 'tags') return false;
    fields++;
  }
  return fields === 2 && isPlainTtl(o.ttl) && plainTags(o.tags);
}

function isPlainTtl(ttl: unknown): boolean {
  return (typeof ttl === 'number' && ttl > 0 && Math.ceil(ttl) <= MAX_DURATION_MS) || (typeof ttl === 'string' && isDuration(ttl));
}

function plainTags(tags: unknown): boolean {
  if (!Array.isArray(tags) || tags.length > MAX_TAGS) return false;
  for (const tag of tags as unknown[]) if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_LENGTH) return false;
  return true;
}

/** The fields of `GetOrComputeOptions`: any other is refused. */
const CALL_OPTION_NAMES: ReadonlySet<string> = new Set([
  'ttl', 'lockTtl', 'waitTimeout', 'onWaitTimeout', 'onRemoteError', 'signal', 'forceRefresh', 'cacheable', 'hitForMissTtl', 'tags', ...FRESHNESS_OPTION_NAMES,
]);
const SET_OPTION_NAMES: ReadonlySet<string> = new Set(['ttl', 'tags']);
const INVALIDATE_OPTION_NAMES: ReadonlySet<string> = new Set(['stale']);

/** Validates one call's arguments (`InvalidOptionError` naming the option) and applies the cache's defaults. */
export function resolveCallOptions<T>(
  defaults: ResolvedCacheOptions,
  key: string,
  loader: Loader<T>,
  ttlOrOptions: Duration | GetOrComputeOptions<T>,
  inline = false,
): CallOptions<T> {
  validateKey(key);
  if (typeof loader !== 'function') throw new InvalidOptionError('loader', `expected a function, got ${loader === null ? 'null' : typeof loader}`);
  if (ttlOrOptions === undefined || ttlOrOptions === null) {
    throw new InvalidOptionError('ttl', "is required: pass milliseconds, a string like '30s', or { ttl }");
  }
  if (typeof ttlOrOptions !== 'object') {
    return {
      ttl: toMs(ttlOrOptions, 'ttl'),
      lockTtl: defaults.lockTtl,
      waitTimeout: defaults.waitTimeout,
      onWaitTimeout: defaults.onWaitTimeout,
      onRemoteError: defaults.onRemoteError,
      signal: undefined,
      cacheable: undefined,
      hitForMissTtl: defaults.hitForMissTtl,
      freshness: defaults.freshness,
      tagStampTtl: defaults.tagStampTtl,
      inlineRefresh: inline,
    };
  }
  const o = ttlOrOptions;
  checkKnownOptions(o, CALL_OPTION_NAMES);
  checkThrowOrLoad(o.onWaitTimeout, 'onWaitTimeout');
  checkThrowOrLoad(o.onRemoteError, 'onRemoteError');
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new InvalidOptionError('signal', 'must be an AbortSignal');
  if (o.cacheable !== undefined && typeof o.cacheable !== 'function') throw new InvalidOptionError('cacheable', 'must be a function');
  if (o.forceRefresh !== undefined && typeof o.forceRefresh !== 'boolean') throw new InvalidOptionError('forceRefresh', `must be true or false, got ${typeof o.forceRefresh}`);
  const ttl = toMs(o.ttl, 'ttl');
  const freshness = resolveFreshness(o, defaults.freshness);
  const tags = o.tags === undefined ? undefined : validateTags(o.tags);
  if (tags && tags.length > 0) checkTaggedLifetime(ttl, freshness, defaults.tagStampTtl);
  return {
    ttl,
    lockTtl: o.lockTtl === undefined ? defaults.lockTtl : toMs(o.lockTtl, 'lockTtl'),
    waitTimeout: o.waitTimeout === undefined ? defaults.waitTimeout : toMs(o.waitTimeout, 'waitTimeout'),
    onWaitTimeout: o.onWaitTimeout ?? defaults.onWaitTimeout,
    onRemoteError: o.onRemoteError ?? defaults.onRemoteError,
    signal: o.signal,
    forceRefresh: o.forceRefresh === true,
    cacheable: o.cacheable,
    hitForMissTtl: o.hitForMissTtl === undefined ? defaults.hitForMissTtl : toMs(o.hitForMissTtl, 'hitForMissTtl', { allowZero: true }),
    freshness,
    tags: tags && tags.length > 0 ? tags : undefined,
    tagStampTtl: defaults.tagStampTtl,
    inlineRefresh: inline,
  };
}

/** `set()`'s third argument, `{ ttl, tags }` form: refuses fields other than those two. */
function checkSetOptions(o: SetOptions): void {
  checkKnownOptions(o, SET_OPTION_NAMES);
}

/** Validates `invalidateTags()`'s options (`InvalidOptionError` naming the option); true for `{ stale: true }`. */
export function resolveInvalidateOptions(options: InvalidateTagsOptions): boolean {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new InvalidOptionError('options', 'expected { stale?: boolean }');
  checkKnownOptions(options, INVALIDATE_OPTION_NAMES);
  if (options.stale !== undefined && typeof options.stale !== 'boolean') throw new InvalidOptionError('stale', `expected a boolean, got ${typeof options.stale}`);
  return options.stale === true;
}

/** A tagged entry may not outlive its tags' invalidations (`tagStampTtl`). */
export function checkTaggedLifetime(ttl: number, freshness: FreshnessRules, tagStampTtl: number): void {
  const life = ttl + staleWindow(freshness);
  if (life > tagStampTtl) {
    throw new InvalidOptionError('ttl', `a tagged entry lives at most tagStampTtl (${tagStampTtl} ms); its ttl plus stale window is ${life} ms: shorten it or raise tagStampTtl`);
  }
}

/** `set()`'s third argument: a TTL, or `{ ttl, tags }`. */
export function setArguments(ttlOrOptions: Duration | SetOptions): { ttl: number; tags: readonly string[] | undefined } {
  if (ttlOrOptions !== null && typeof ttlOrOptions === 'object') {
    checkSetOptions(ttlOrOptions);
    const tags = ttlOrOptions.tags === undefined ? undefined : validateTags(ttlOrOptions.tags);
    return { ttl: toMs(ttlOrOptions.ttl, 'ttl'), tags: tags && tags.length > 0 ? tags : undefined };
  }
  return { ttl: toMs(ttlOrOptions, 'ttl'), tags: undefined };
}
