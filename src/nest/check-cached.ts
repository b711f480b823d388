import type { Type } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { DogpileCache } from '../core/cache.js';
import { renamedOptionError } from '../shared/option-table.js';
import { freshnessOver } from '../http/options.js';
import { CACHED_METADATA } from './constants.js';
import { mergeCachedOptions, type ResolvedCachedOptions } from './options.js';

/**
 * Checks the stale-serving options of every `@Cached` (on a controller, a handler or a
 * provider method, the class's merged under the method's) over the module cache's, when the
 * module starts: an option that contradicts the cache's (a `softTimeout` not shorter than the
 * cache's `hardTimeout`) is an `InvalidOptionError` then, not a failure of every request.
 */
export function checkCachedOverCache(discovery: DiscoveryService, scanner: MetadataScanner, reflector: Reflector, cache: DogpileCache): void {
  const seen = new Set<unknown>();
  for (const wrapper of [...discovery.getControllers(), ...discovery.getProviders()]) {
    const cls = wrapper.metatype as Type<unknown> | null | undefined;
    if (typeof cls !== 'function' || seen.has(cls)) continue;
    seen.add(cls);
    const onClass = reflector.get<ResolvedCachedOptions | undefined>(CACHED_METADATA, cls);
    if (onClass !== undefined) check(cache, onClass, cls.name);
    const proto = cls.prototype as object | undefined;
    if (!proto) continue;
    for (const name of scanner.getAllMethodNames(proto)) {
      const method = (proto as Record<string, unknown>)[name];
      if (typeof method !== 'function') continue;
      const onHandler = reflector.get<ResolvedCachedOptions | undefined>(CACHED_METADATA, method as () => unknown);
      if (onHandler !== undefined) check(cache, mergeCachedOptions(onClass, onHandler), `${cls.name}.${name}`);
    }
  }
}

function check(cache: DogpileCache, options: ResolvedCachedOptions, where: string): void {
  try {
    freshnessOver(cache, options.freshness ?? {});
  } catch (error) {
    throw renamedOptionError(error, (name) => name, ` in @Cached of ${where}`);
  }
}
