import type { DogpileCache } from '../core/cache.js';
import { validateNamespaceName } from '../core/namespace.js';
import { describe, type Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { byteCount, duration, durationOrZero, fn, oneOf, renamedOptionError, resolveOptions, type Check, type OptionTable } from '../shared/option-table.js';
import { cacheStatusNameProblem, DEFAULT_CACHE_STATUS_NAME } from './rules/cache-status.js';
import { FRESHNESS_DEFAULTS, FRESHNESS_OPTION_NAMES, FRESHNESS_OVERRIDE_TABLE, resolveFreshness, type FreshnessOptions } from '../core/freshness.js';

/**
 * Options of the HTTP adapters (`dogpileGuard()` for Express, `dogpileGuardPlugin` for
 * Fastify). `Req` is the framework's request type, handed to `key` and `skip`.
 */
/**
 * The stale-serving options (`staleWhileRevalidate`, `staleIfError`, `failSafeRetry`,
 * `softTimeout`, `hardTimeout`, `earlyRefresh`) override the cache's for these responses.
 */
export interface HttpCacheOptions<Req = unknown> extends FreshnessOptions {
  /**
   * The cache that holds responses and coalesces misses. Give one made with
   * `createCache({ redis })` to coalesce across every process sharing that Redis; the
   * adapters never close it.
   * @default the default cache (`getDefaultCache()`: in this process, read at each request)
   */
  cache?: DogpileCache;
  /**
   * Stores the responses in this namespace of the cache (`cache.namespace(name)`): their keys
   * and tags live apart, and `cache.namespace(name).clear()` drops exactly them, in every
   * process. A name of 1 to 256 characters without `/`, `{` or `}`. @default none (the cache itself)
   */
  namespace?: string;
  /**
   * How long a response that says nothing about its own freshness stays cached (no
   * `s-maxage`, `max-age` or `Expires` in `Dogpile-Cache-Control`, `CDN-Cache-Control` or
   * `Cache-Control`): ms or a string like `'30s'`, `'5m'`. A response that does say is kept for
   * the lifetime it gives (capped by `maxTtl`). 0 stores only responses with explicit freshness.
   * @default 60_000 (ms)
   */
  ttl?: Duration;
  /**
   * Upper bound of every stored response's lifetime, whatever its headers say.
   * @default 86_400_000 (one day)
   */
  maxTtl?: Duration;
  /**
   * The name of this cache in the `Cache-Status` response header (RFC 9211); printable ASCII.
   * @default 'dogpile-guard'
   */
  cacheStatusName?: string;
  /**
   * Replaces the default key (method + host + path + sorted query). Return a falsy value to
   * let the request through uncached. Giving a key function is also how requests that carry
   * one of `privateHeaders` (`Authorization`, `Cookie`) become cacheable: the key must then
   * include the identity (user id, tenant, ...), or one user's response will be served to another.
   * The request headers a response names in `Vary` are still added to the key. A successful
   * write (POST, PUT, PATCH, DELETE) invalidates the key this function returns for the write's
   * request seen as a GET (`method` reads 'GET').
   */
  key?: (req: Req) => string | null | undefined | false;
  /**
   * Response statuses that may be stored on the adapter's `ttl` (responses without explicit
   * freshness). A response with explicit freshness may also be stored with any status RFC 9110
   * §15.1 calls heuristically cacheable (200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501).
   * A 206 is never stored. @default [200]
   */
  statuses?: readonly number[];
  /** Return true to let a request through untouched (no lookup, no coalescing). */
  skip?: (req: Req) => boolean;
  /**
   * Tags of the stored response of a request (e.g. `(req) => ['user:' + req.params.id]`):
   * `cache.invalidateTags([...])` on any of them, in any process, makes it a miss (or stale
   * with `{ stale: true }`). The handler adds its own with a `Dogpile-Tags` response header
   * (comma-separated; read by this cache only, removed before the response is sent). At most
   * `MAX_TAGS` (64) non-empty strings per response; anything else is an `InvalidOptionError`
   * passed to the framework's error handling.
   */
  tags?: (req: Req) => readonly string[] | null | undefined;
  /**
   * Bodies larger than this (bytes) are sent to their client and not stored; requests
   * waiting for that response run their own handler.
   * @default 1_048_576 (1 MiB)
   */
  maxBodySize?: number;
  /**
   * After a response that could not be shared (Set-Cookie, private, a status outside
   * `statuses`, a body over `maxBodySize`), requests for that resource skip waiting for this
   * long and run their own handler at once ("hit-for-miss"); 0 turns it off.
   * @default 5000 (ms)
   */
  hitForMissTtl?: Duration;
  /**
   * Request headers that carry an identity: a request with any of them passes through
   * uncached, unless a `key` function is given (which must then include the identity). Add
   * the headers your app authenticates with, e.g. `[...HTTP_CACHE_DEFAULTS.privateHeaders, 'x-api-key']`.
   * @default ['authorization', 'cookie']
   */
  privateHeaders?: readonly string[];
  /**
   * How a stored response past its freshness, inside its stale window
   * (`staleWhileRevalidate`, or the response's own `stale-while-revalidate`), is refreshed.
   * `'background'`: every request gets it at once (`X-Cache: STALE`) and one refresh runs
   * fleet-wide, detached from any client: the route's handler runs for a request
   * reconstructed from the stored one (see docs/http-refresh.md for exactly what it carries).
   * `'foreground'`: the request that wins the refresh runs its own handler and waits for it
   * (`X-Cache: MISS`), for handlers that depend on the live request. With a `key` function
   * and no `replayHeaders`, refreshes run in the foreground: the cache cannot tell which
   * request headers the key depends on.
   * @default 'background'
   */
  refresh?: 'background' | 'foreground';
  /**
   * Request headers a background refresh carries over from the request that found the
   * response stale, besides those the key and the response's `Vary` name (e.g. the header a
   * `key` function reads: `['x-tenant']`). Giving it with a `key` function lets refreshes run
   * in the background.
   * @default [] (none)
   */
  replayHeaders?: readonly string[];
}

export interface ResolvedHttpCacheOptions<Req = unknown> {
  cache: DogpileCache | undefined;
  namespace: string | undefined;
  ttl: number;
  maxTtl: number;
  cacheStatusName: string;
  key: ((req: Req) => string | null | undefined | false) | undefined;
  statuses: ReadonlySet<number>;
  skip: ((req: Req) => boolean) | undefined;
  tags: ((req: Req) => readonly string[] | null | undefined) | undefined;
  maxBodySize: number;
  hitForMissTtl: number;
  /** Lower-case header names. */
  privateHeaders: readonly string[];
  /** The stale-serving options given (validated); the cache's apply to the others. */
  freshness: FreshnessOptions;
  refresh: 'background' | 'foreground';
  /** Lower-case header names; undefined when none were given. */
  replayHeaders: readonly string[] | undefined;
}

export const HTTP_CACHE_DEFAULTS = {
  ttl: 60_000,
  maxTtl: 86_400_000,
  cacheStatusName: DEFAULT_CACHE_STATUS_NAME,
  hitForMissTtl: 5000,
  statuses: [200] as readonly number[],
  maxBodySize: 1_048_576,
  privateHeaders: Object.freeze(['authorization', 'cookie']) as readonly string[],
} as const;

// RFC 9110 §5.1: field-name = token.
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/i;

/**
 * Validates a `privateHeaders` list: an array of header names (RFC 9110 tokens). Returns
 * them lower-case (Node's request headers are), without duplicates.
 */
export function resolvePrivateHeaders(value: unknown, option = 'privateHeaders'): readonly string[] {
  if (!Array.isArray(value)) throw new InvalidOptionError(option, `expected an array of header names, got ${describe(value)}`);
  const names = new Set<string>();
  for (const name of value as unknown[]) {
    if (typeof name !== 'string' || !HEADER_NAME.test(name)) {
      throw new InvalidOptionError(option, `expected header names (letters, digits and !#$%&'*+-.^_\`|~), got ${describe(name)}`);
    }
    names.add(name.toLowerCase());
  }
  return [...names];
}

/** The `cache` option of the adapters and the Nest module: a cache made by `createCache()`. */
export const cacheCheck: Check<DogpileCache> = (value, option) => {
  if (typeof value !== 'object' || value === null || typeof (value as { resolve?: unknown }).resolve !== 'function') {
    throw new InvalidOptionError(option, 'expected a cache made by createCache()');
  }
  return value as DogpileCache;
};

/** Checks a key function's result: a non-empty string, or a falsy value for "do not cache" (undefined). */
export function checkKey(value: unknown): string | undefined {
  if (!value) return undefined;
  if (typeof value !== 'string') throw new InvalidOptionError('key', `must return a string (or a falsy value to skip the cache), got ${describe(value)}`);
  return value;
}

/** A `refresh` option: `'background'` or `'foreground'`. */
export const refreshMode = oneOf('background', 'foreground');

const statusesCheck: Check<ReadonlySet<number>> = (value, option) => {
  if (!Array.isArray(value) || value.length === 0) throw new InvalidOptionError(option, `expected a non-empty array of HTTP statuses, got ${describe(value)}`);
  for (const s of value as unknown[]) {
    if (typeof s !== 'number' || !Number.isInteger(s) || s < 100 || s > 599) throw new InvalidOptionError(option, `expected statuses between 100 and 599, got ${describe(s)}`);
  }
  return new Set(value as number[]);
};

const cacheStatusNameCheck: Check<string> = (value, option) => {
  const problem = cacheStatusNameProblem(value as string);
  if (problem !== undefined) throw new InvalidOptionError(option, `${problem}, got ${describe(value)}`);
  return value as string;
};

/** The options of the HTTP adapters, declared once (docs/express.md shows them). */
export const HTTP_TABLE = {
  cache: { check: cacheCheck, shown: 'the default cache', doc: 'the cache that holds responses and coalesces misses' },
  namespace: { check: validateNamespaceName, shown: 'none', doc: 'stores the responses in this namespace of the cache' },
  ttl: { default: HTTP_CACHE_DEFAULTS.ttl, check: durationOrZero, shown: '`60_000`', doc: 'how long a response that says nothing about its freshness is cached' },
  maxTtl: { default: HTTP_CACHE_DEFAULTS.maxTtl, check: duration, shown: '`86_400_000` (1 day)', doc: "upper bound of every stored response's lifetime" },
  cacheStatusName: { default: HTTP_CACHE_DEFAULTS.cacheStatusName, check: cacheStatusNameCheck, shown: "`'dogpile-guard'`", doc: 'the name of this cache in `Cache-Status`' },
  key: { check: fn<(req: never) => string | null | undefined | false>('(req) => string'), shown: 'method + host + path + sorted query', doc: 'replaces the default key' },
  statuses: { default: new Set(HTTP_CACHE_DEFAULTS.statuses) as ReadonlySet<number>, check: statusesCheck, shown: '`[200]`', doc: "statuses that may be stored on the adapter's `ttl`" },
  skip: { check: fn<(req: never) => boolean>('(req) => boolean'), shown: '—', doc: 'return true to let a request through untouched' },
  tags: { check: fn<(req: never) => readonly string[] | null | undefined>('(req) => string[]'), shown: '—', doc: 'tags of the stored response of a request' },
  maxBodySize: { default: HTTP_CACHE_DEFAULTS.maxBodySize, check: byteCount, shown: '`1_048_576` (1 MiB)', doc: 'larger bodies are sent, not stored' },
  hitForMissTtl: { default: HTTP_CACHE_DEFAULTS.hitForMissTtl, check: durationOrZero, shown: '`5000`', doc: 'after a response that could not be shared, requests skip waiting for this long' },
  privateHeaders: { default: HTTP_CACHE_DEFAULTS.privateHeaders, check: resolvePrivateHeaders, shown: "`['authorization', 'cookie']`", doc: 'request headers that carry an identity' },
  refresh: { default: 'background' as const, check: refreshMode, shown: "`'background'`", doc: 'how a stale response inside its window is refreshed' },
  replayHeaders: { check: resolvePrivateHeaders, shown: 'none', doc: 'request headers a background refresh carries over' },
  ...FRESHNESS_OVERRIDE_TABLE,
} satisfies OptionTable<HttpCacheOptions>;

/** Validates the options once, when the middleware or plugin is created. */
export function resolveHttpCacheOptions<Req>(
  options: HttpCacheOptions<Req> | undefined,
  { extra = [] as readonly string[] } = {},
): ResolvedHttpCacheOptions<Req> {
  const o = resolveOptions(HTTP_TABLE, options, { extra });
  const given = (options ?? {}) as FreshnessOptions;
  return {
    cache: o.cache,
    namespace: o.namespace,
    ttl: o.ttl,
    maxTtl: o.maxTtl,
    cacheStatusName: o.cacheStatusName,
    key: o.key as ((req: Req) => string | null | undefined | false) | undefined,
    statuses: o.statuses,
    skip: o.skip as ((req: Req) => boolean) | undefined,
    tags: o.tags as ((req: Req) => readonly string[] | null | undefined) | undefined,
    maxBodySize: o.maxBodySize,
    hitForMissTtl: o.hitForMissTtl,
    privateHeaders: o.privateHeaders,
    freshness: o.cache === undefined ? pickFreshness(given) : freshnessOver(o.cache, pickFreshness(given)),
    refresh: o.refresh,
    replayHeaders: o.replayHeaders,
  };
}

/**
 * The adapter's stale-serving options, checked over the cache's (e.g. an adapter's
 * `softTimeout` not shorter than the cache's `hardTimeout`): refused when the middleware is
 * made rather than at every request.
 */
export function freshnessOver(cache: DogpileCache, given: FreshnessOptions, prefix = ''): FreshnessOptions {
  try {
    resolveFreshness(given, cache.options.freshness);
  } catch (error) {
    throw renamedOptionError(error, (name) => `${prefix}${name}`, " (checked over the cache's options)");
  }
  return given;
}

/** The stale-serving options present in `o`, validated now (`InvalidOptionError` naming the option). */
export function pickFreshness(o: FreshnessOptions, prefix = ''): FreshnessOptions {
  const given: Record<string, unknown> = {};
  for (const name of FRESHNESS_OPTION_NAMES) if (o[name] !== undefined) given[name] = o[name];
  try {
    resolveFreshness(given as FreshnessOptions, FRESHNESS_DEFAULTS);
  } catch (error) {
    throw prefix ? renamedOptionError(error, (name) => `${prefix}${name}`) : error;
  }
  return given as FreshnessOptions;
}
