export { DogpileCache, type CacheResult, type CacheStatus, type StaleReason, type CacheEvents, type CacheDecision, type StoreDecision, type GetOrComputeOptions, type Loader, type LoaderContext, type SetOptions, type InvalidateTagsOptions, type ClearOptions, type SetManyEntry, type SetManyOptions, type BatchLoader, type BatchLoaderContext, type BatchResult } from './core/cache.js';
export { MAX_TAGS, MAX_TAG_LENGTH } from './shared/tag-names.js';
export { createCache, getDefaultCache, setDefaultCache, getOrCompute, cacheWithoutDogpiling } from './core/default-cache.js';
export { CACHE_DEFAULTS, type CacheOptions, type L1Options } from './core/options.js';
export { FRESHNESS_DEFAULTS, type FreshnessOptions } from './core/freshness.js';
export { portableSerializer, v8Serializer, jsonSerializer, type Serializer } from './store/serializer.js';
export * from './lock/index.js';
export * from './shared/errors.js';
export { toMs, type Duration } from './shared/duration.js';
