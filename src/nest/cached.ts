import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { CACHED_METADATA } from './constants.js';
import { DogpileInterceptor } from './dogpile-interceptor.js';
import { resolveCachedOptions, type CachedOptions, type CachedTtl } from './options.js';

/**
 * Caches a route handler's result (on a controller method) or all of a controller's routes
 * (on the class; a handler's own `@Cached` wins, option by option), and runs the handler
 * once for all concurrent misses across every process sharing the cache's Redis.
 *
 * ```ts
 * @Get(':id') @Cached('1m') findOne(@Param('id') id: string) { ... }
 * @Get() @Cached({ ttl: (ctx) => ..., key: (ctx) => ... }) list() { ... }
 * ```
 *
 * On a provider (service) method it caches the method's result per arguments, when the
 * provider is created by a module that imports `DogpileModule` (see `DogpileModule`).
 *
 * Options are checked when the decorator is applied: a bad TTL fails at startup.
 */
export function Cached(ttlOrOptions?: CachedTtl | CachedOptions): MethodDecorator & ClassDecorator {
  const options = resolveCachedOptions(ttlOrOptions);
  return applyDecorators(SetMetadata(CACHED_METADATA, options), UseInterceptors(DogpileInterceptor));
}
