import { isDuration, MAX_DURATION_MS, toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { abortSignal, boolean, duration, durationOrZero, fn, optionsObject, resolveCallFields, resolveOptions, type OptionTable } from '../shared/option-table.js';
import { validateKey } from '../shared/keys.js';
import { MAX_TAG_LENGTH, MAX_TAGS, validateTags } from '../shared/tag-names.js';
import { freshnessRules, FRESHNESS_TABLE, staleWindow, type FreshnessRules } from './freshness.js';
import { throwOrLoad, type ResolvedCacheOptions } from './options.js';
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

/** The options of one call (`getOrCompute`, `resolve`, ...), declared once; an omitted one is the cache's. */
export const CALL_TABLE = {
  ttl: { required: true, check: duration, doc: "how long the value stays cached: ms or a string like '30s'" },
  lockTtl: { check: duration, doc: "overrides the cache's `lockTtl` for this call" },
  waitTimeout: { check: duration, doc: "overrides the cache's `waitTimeout` for this call" },
  onWaitTimeout: { check: throwOrLoad, doc: "overrides the cache's `onWaitTimeout` for this call" },
  onRemoteError: { check: throwOrLoad, doc: "overrides the cache's `onRemoteError` for this call" },
  signal: { check: abortSignal, doc: "stops this caller's wait (not the shared loader)" },
  forceRefresh: { default: false, check: boolean, doc: 'runs the loader now whatever is stored' },
  cacheable: { check: fn<(value: never) => CacheDecision>('(value) => decision'), doc: 'decides what happens to the result' },
  hitForMissTtl: { check: durationOrZero, doc: "overrides the cache's `hitForMissTtl` for a `'private'` result" },
  tags: { check: validateTags, doc: 'tags of the stored value' },
  ...FRESHNESS_TABLE,
} satisfies OptionTable<GetOrComputeOptions>;

/** `set()`'s `{ ttl, tags }`, declared once. */
export const SET_TABLE = {
  ttl: CALL_TABLE.ttl,
  tags: CALL_TABLE.tags,
} satisfies OptionTable<SetOptions>;

/** `invalidateTags()`'s options, declared once. */
export const INVALIDATE_TABLE = {
  stale: { default: false, check: boolean, doc: 'make the entries stale instead of a miss' },
} satisfies OptionTable<InvalidateTagsOptions>;

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
  const o = resolveCallFields(CALL_TABLE, ttlOrOptions, callDefaults(defaults));
  const freshness = freshnessRules(o);
  const tags = o.tags !== undefined && o.tags.length > 0 ? o.tags : undefined;
  if (tags) checkTaggedLifetime(o.ttl, freshness, defaults.tagStampTtl);
  return {
    ttl: o.ttl,
    lockTtl: o.lockTtl!,
    waitTimeout: o.waitTimeout!,
    onWaitTimeout: o.onWaitTimeout!,
    onRemoteError: o.onRemoteError!,
    signal: o.signal,
    forceRefresh: o.forceRefresh,
    cacheable: o.cacheable as ((value: T) => CacheDecision) | undefined,
    hitForMissTtl: o.hitForMissTtl!,
    freshness,
    tags,
    tagStampTtl: defaults.tagStampTtl,
    inlineRefresh: inline,
  };
}

/** The cache's options as the defaults of `CALL_TABLE`'s rows, made once per cache. */
const CALL_DEFAULTS = new WeakMap<ResolvedCacheOptions, Readonly<Record<string, unknown>>>();

function callDefaults(defaults: ResolvedCacheOptions): Readonly<Record<string, unknown>> {
  let made = CALL_DEFAULTS.get(defaults);
  if (made === undefined) {
    made = { ...defaults, ...defaults.freshness, earlyRefresh: defaults.freshness.earlyRefreshBeta };
    CALL_DEFAULTS.set(defaults, made);
  }
  return made;
}

/** Validates `invalidateTags()`'s options (`InvalidOptionError` naming the option); true for `{ stale: true }`. */
export function resolveInvalidateOptions(options: InvalidateTagsOptions): boolean {
  return resolveOptions(INVALIDATE_TABLE, optionsObject(options)).stale;
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
    const { ttl, tags } = resolveOptions(SET_TABLE, ttlOrOptions);
    return { ttl, tags: tags && tags.length > 0 ? tags : undefined };
  }
  return { ttl: toMs(ttlOrOptions, 'ttl'), tags: undefined };
}
