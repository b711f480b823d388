/**
 * Injection tokens and metadata keys of `dogpile-guard/nest`. Metadata keys are namespaced
 * so they cannot meet another library's.
 */

/** Injection token of the module's `DogpileCache` (also what `@InjectCache()` injects). */
export const DOGPILE_CACHE = Symbol.for('dogpile-guard:cache');

/** Injection token of the interceptor defaults resolved from the module options. */
export const DOGPILE_DEFAULTS = Symbol.for('dogpile-guard:defaults');

/** Where `@Cached()` keeps its options, on a handler, a controller class or a provider method. */
export const CACHED_METADATA = 'dogpile-guard:cached';

/** Where `@InvalidateTags()` keeps its tags, on a handler or a controller class. */
export const INVALIDATE_TAGS_METADATA = 'dogpile-guard:invalidate-tags';

/**
 * Metadata keys and values Nest itself uses for route handlers (stable since Nest 8; copied
 * here because deep imports differ between the CommonJS Nest 11 and the ESM-only Nest 12).
 */
export const NEST_ROUTE_ARGS_METADATA = '__routeArguments__';
export const NEST_HEADERS_METADATA = '__headers__';
export const NEST_SSE_METADATA = '__sse__';
/** `RouteParamtypes.RESPONSE` (`@Res()`) and `RouteParamtypes.NEXT` (`@Next()`). */
export const NEST_PARAM_RESPONSE = 1;
export const NEST_PARAM_NEXT = 2;
