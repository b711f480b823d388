/**
 * `dogpile-guard/nest`: `DogpileModule`, `@Cached()` and `DogpileInterceptor` for NestJS 11
 * (CommonJS) and 12 (ESM).
 */
export { DogpileModule } from './dogpile-module.js';
export { DOGPILE_MODULE_OPTIONS, type DogpileModuleForRootOptions, type DogpileModuleAsyncOptions } from './module-definition.js';
export { DogpileInterceptor } from './dogpile-interceptor.js';
export { Cached } from './cached.js';
export { InvalidateTags, InvalidateTagsInterceptor } from './invalidate-tags.js';
export { InjectCache } from './inject-cache.js';
export { MethodCallContext, METHOD_CONTEXT_TYPE } from './method-context.js';
export { DOGPILE_CACHE, DOGPILE_DEFAULTS, CACHED_METADATA, INVALIDATE_TAGS_METADATA } from './constants.js';
export {
  NEST_DEFAULTS,
  type CachedOptions,
  type CachedTtl,
  type CachedKeyFactory,
  type CachedTags,
  type DogpileModuleOptions,
  type DogpileDefaults,
  type ResolvedCachedOptions,
} from './options.js';
export { DogpileCache, type CacheResult, type CacheStatus } from '../core/cache.js';
