import type { ExecutionContext } from '@nestjs/common';
import type { DogpileCache } from '../core/cache.js';
import { describe, toMs, type Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { duration, fn, optionNames, optionsObject, resolveFields, resolveOptions, type Check, type OptionTable, type ResolvedTable } from '../shared/option-table.js';
import { CACHE_TABLE, type CacheOptions } from '../core/options.js';
export { checkKey } from '../http/options.js';
import { cacheCheck, HTTP_CACHE_DEFAULTS, HTTP_TABLE, pickFreshness, refreshMode, resolvePrivateHeaders } from '../http/options.js';
import { FRESHNESS_OVERRIDE_TABLE, type FreshnessOptions } from '../core/freshness.js';
import { validateTags } from '../shared/tag-names.js';
import { validateNamespaceName } from '../core/namespace.js';

/** A TTL, or a function of the request's execution context that returns one. */
export type CachedTtl = Duration | ((context: ExecutionContext) => Duration | Promise<Duration>);

/**
 * A key function: returns the key for this request, or a falsy value to let it through
 * uncached. On a provider method, `context.getArgs()` are the method's arguments.
 */
export type CachedKeyFactory = (context: ExecutionContext) => string | null | undefined | false | Promise<string | null | undefined | false>;

/**
 * Tags of a cached value, or a function of the execution context that returns them (a falsy
 * result: none). `cache.invalidateTags([...])` on any of them drops the value in every process.
 */
export type CachedTags = readonly string[] | ((context: ExecutionContext) => readonly string[] | null | undefined | Promise<readonly string[] | null | undefined>);

/**
 * Options of `@Cached(...)`. The stale-serving options (`staleWhileRevalidate`, `staleIfError`,
 * `failSafeRetry`, `softTimeout`, `hardTimeout`, `earlyRefresh`) override the module cache's.
 */
export interface CachedOptions extends FreshnessOptions {
  /**
   * How long the result stays cached: ms, a string like `'5m'`, or a function of the
   * execution context. @default the module's `ttl`
   */
  ttl?: CachedTtl;
  /**
   * Replaces the default key. On a route: the default key is method + host + path + sorted
   * query, as in the Express and Fastify adapters. Giving a key function is also how
   * requests that carry `Authorization` or `Cookie` become cacheable: the key must then
   * include the identity (user id, tenant, ...), or one user's response will be served to
   * another. On a provider method the default key is class, method and arguments (as JSON).
   */
  key?: CachedKeyFactory;
  /**
   * Request headers that carry an identity: a request with any of them passes through
   * uncached unless there is a `key` function. Replaces the module's list for this route
   * (or controller). @default the module's `privateHeaders`
   */
  privateHeaders?: readonly string[];
  /**
   * Tags of the cached value: a list, or a function of the execution context (on a route,
   * e.g. `(ctx) => ['product:' + ctx.switchToHttp().getRequest().params.id]`; on a provider
   * method, `ctx.getArgs()` are its arguments). `cache.invalidateTags([...])`, or
   * `@InvalidateTags()` on another handler, drops every value carrying one of them, in every
   * process. On a route, a `Dogpile-Tags` response header adds more. At most `MAX_TAGS` (64)
   * non-empty strings: anything else is an `InvalidOptionError` (a list: when the decorator
   * is applied). A handler's `tags` replace its controller's.
   */
  tags?: CachedTags;
  /**
   * Keeps the cached values in this namespace of the module's cache (`cache.namespace(name)`):
   * their keys and tags live apart, and that namespace's `clear()` drops exactly them. A
   * handler's `namespace` replaces its controller's. @default none (the cache itself)
   */
  namespace?: string;
}

/** `@Cached` options after validation; a static TTL is in ms. */
export interface ResolvedCachedOptions {
  ttl: number | ((context: ExecutionContext) => Duration | Promise<Duration>) | undefined;
  key: CachedKeyFactory | undefined;
  /** Lower-case; undefined: the module's. */
  privateHeaders?: readonly string[] | undefined;
  /** The stale-serving options given (validated); the cache's apply to the others. */
  freshness?: FreshnessOptions;
  /** Validated when a list. */
  tags?: CachedTags | undefined;
  namespace?: string | undefined;
}

/** Options of `DogpileModule.forRoot()` / what `forRootAsync()`'s factory returns. */
export interface DogpileModuleOptions extends CacheOptions {
  /**
   * Use this cache instead of creating one from the other options. The module never closes
   * a cache it was given.
   */
  cache?: DogpileCache;
  /** TTL of `@Cached()` routes and methods that do not give one. @default 60_000 (ms) */
  ttl?: Duration;
  /**
   * Request headers that carry an identity: a request with any of them passes through
   * uncached, unless the route has a `key` function (which must then include the identity).
   * Add the headers your app authenticates with, e.g. `['authorization', 'cookie', 'x-api-key']`.
   * @default ['authorization', 'cookie']
   */
  privateHeaders?: readonly string[];
  /**
   * How a stale value of an HTTP route inside its `staleWhileRevalidate` window is refreshed:
   * `'background'` answers every request with it and runs the route once, detached from any
   * client, for a request reconstructed from the URL (see docs/http-refresh.md);
   * `'foreground'` lets the request that wins the refresh run the handler and wait for it.
   * Routes with a `key` function (or a `trackBy()` override) refresh in the foreground unless
   * `replayHeaders` is given.
   * @default 'background'
   */
  refresh?: 'background' | 'foreground';
  /** Request headers a background refresh carries over from the request that found the value stale. @default [] */
  replayHeaders?: readonly string[];
}

/** What the module hands the interceptor and the provider-method wrapper. */
export interface DogpileDefaults {
  /** @default 60_000 (ms) */
  ttl: number;
  /** Lower-case header names. @default ['authorization', 'cookie'] */
  privateHeaders?: readonly string[];
  /** @default 'background' */
  refresh?: 'background' | 'foreground';
  /** Lower-case header names; undefined when not given. */
  replayHeaders?: readonly string[] | undefined;
}

export const NEST_DEFAULTS = {
  ttl: 60_000,
  privateHeaders: HTTP_CACHE_DEFAULTS.privateHeaders,
} as const;

/** A `ttl` of `@Cached`: a duration (in ms once checked), or a function of the context. */
const cachedTtl: Check<number | ((context: ExecutionContext) => Duration | Promise<Duration>)> = (value, option) =>
  typeof value === 'function' ? (value as (context: ExecutionContext) => Duration | Promise<Duration>) : toMs(value, option);

/** The options of `@Cached(...)`, declared once; an omitted one is the module's (or the controller's). */
export const CACHED_TABLE = {
  ttl: { check: cachedTtl, doc: "how long the result stays cached: ms, a string like '5m', or a function of the context" },
  key: { check: fn<CachedKeyFactory>('(context) => string'), doc: 'replaces the default key' },
  privateHeaders: { check: resolvePrivateHeaders, doc: "request headers that carry an identity; replaces the module's list" },
  tags: { check: resolveTags, doc: 'tags of the cached value: a list, or a function of the context' },
  namespace: { check: validateNamespaceName, doc: "keeps the cached values in this namespace of the module's cache" },
  ...FRESHNESS_OVERRIDE_TABLE,
} satisfies OptionTable<CachedOptions>;

/** Validates what `@Cached(...)` was given, when the decorator is applied. */
export function resolveCachedOptions(input: CachedTtl | CachedOptions | undefined): ResolvedCachedOptions {
  if (input === undefined) return { ttl: undefined, key: undefined };
  if (typeof input === 'number' || typeof input === 'string') return { ttl: toMs(input, 'ttl'), key: undefined };
  if (typeof input === 'function') return { ttl: input, key: undefined };
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidOptionError('ttlOrOptions', `expected a TTL (ms or '5m'), a function of the context, or { ttl, key, privateHeaders }; got ${describe(input)}`);
  }
  const { ttl, key, privateHeaders, tags, namespace } = resolveOptions(CACHED_TABLE, input);
  const resolved: ResolvedCachedOptions = { ttl, key, privateHeaders, freshness: pickFreshness(input) };
  if (tags !== undefined) resolved.tags = tags;
  if (namespace !== undefined) resolved.namespace = namespace;
  return resolved;
}

/** Class-level options, overridden field by field by the handler's own. */
export function mergeCachedOptions(
  onClass: ResolvedCachedOptions | undefined,
  onHandler: ResolvedCachedOptions | undefined,
): ResolvedCachedOptions {
  return {
    ttl: onHandler?.ttl ?? onClass?.ttl,
    key: onHandler?.key ?? onClass?.key,
    privateHeaders: onHandler?.privateHeaders ?? onClass?.privateHeaders,
    freshness: { ...onClass?.freshness, ...onHandler?.freshness },
    tags: onHandler?.tags ?? onClass?.tags,
    namespace: onHandler?.namespace ?? onClass?.namespace,
  };
}

/** Checks tags given to a decorator: a list is validated now, a function when it is called. */
export function resolveTags(tags: unknown, option = 'tags'): CachedTags {
  if (typeof tags === 'function') return tags as CachedTags;
  if (!Array.isArray(tags)) throw new InvalidOptionError(option, `expected an array of tags or a function (context) => string[], got ${describe(tags)}`);
  return validateTags(tags, option);
}

/** The tags of one call: the list, or what the function returns for `context` (validated; none for a falsy result). */
export async function tagsFor(tags: CachedTags | undefined, context: ExecutionContext, option = 'tags'): Promise<readonly string[] | undefined> {
  if (tags === undefined) return undefined;
  const list = typeof tags === 'function' ? await tags(context) : tags;
  if (list === undefined || list === null) return undefined;
  const valid = validateTags(list, option);
  return valid.length > 0 ? valid : undefined;
}

/** The TTL of one call in ms: the route's (static or computed), else the module default. */
export async function ttlFor(options: ResolvedCachedOptions, defaults: DogpileDefaults, context: ExecutionContext): Promise<number> {
  const { ttl } = options;
  if (ttl === undefined) return defaults.ttl;
  if (typeof ttl === 'number') return ttl;
  return toMs(await ttl(context), 'ttl');
}


/** The options `DogpileModule.forRoot()` adds to those of `createCache()`, declared once. */
export const MODULE_ONLY_TABLE = {
  cache: { check: cacheCheck, shown: 'none', doc: 'use this cache instead of creating one from the other options' },
  ttl: { default: NEST_DEFAULTS.ttl, check: duration, shown: '`60_000`', doc: 'TTL of `@Cached()` routes and methods that do not give one' },
  privateHeaders: HTTP_TABLE.privateHeaders,
  refresh: { default: 'background' as const, check: refreshMode, shown: "`'background'`", doc: 'how a stale value of an HTTP route is refreshed' },
  replayHeaders: { check: resolvePrivateHeaders, shown: 'none', doc: 'request headers a background refresh carries over' },
};

/** Every option of `DogpileModuleOptions`. */
export const MODULE_TABLE = { ...CACHE_TABLE, ...MODULE_ONLY_TABLE } satisfies OptionTable<DogpileModuleOptions>;

/** `isGlobal` is taken by the module builder, beside the options. */
const MODULE_EXTRAS = ['isGlobal'];

/**
 * Splits a Nest module's options into what `createCache()` takes (every name not in `own` or
 * `extras`) and the module's own options resolved by `own`; refuses unknown names, and `cache`
 * given beside options to create one.
 */
export function splitCacheOptions<Own extends OptionTable<{ cache?: unknown }>>(
  options: unknown,
  own: Own,
  extras: readonly string[],
): { cacheOptions: CacheOptions; own: ResolvedTable<Own> } {
  const o = optionsObject(options ?? {});
  checkKnownOptions(o, [...optionNames(CACHE_TABLE), ...optionNames(own), ...extras]);
  const cacheOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(o)) {
    if (!(name in own) && !extras.includes(name)) cacheOptions[name] = value;
  }
  const resolved = resolveFields(own, o);
  if ((resolved as { cache?: unknown }).cache !== undefined) {
    const extra = Object.keys(cacheOptions).filter((k) => cacheOptions[k] !== undefined);
    if (extra.length > 0) {
      throw new InvalidOptionError('cache', `give either an existing cache or options to create one, not both (also given: ${extra.join(', ')})`);
    }
  }
  return { cacheOptions: cacheOptions as CacheOptions, own: resolved };
}

/** Splits the module options into what `createCache()` takes and the interceptor defaults. */
export function splitModuleOptions(options: DogpileModuleOptions | undefined): {
  cache: DogpileCache | undefined;
  cacheOptions: CacheOptions;
  defaults: DogpileDefaults;
} {
  const { cacheOptions, own } = splitCacheOptions(options, MODULE_ONLY_TABLE, MODULE_EXTRAS);
  const { cache, ttl, privateHeaders, refresh, replayHeaders } = own;
  return { cache, cacheOptions, defaults: { ttl, privateHeaders, refresh, replayHeaders } };
}
