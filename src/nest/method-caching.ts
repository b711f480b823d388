import type { Type } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { DogpileCache } from '../core/cache.js';
import { InvalidOptionError } from '../shared/errors.js';
import { CACHED_METADATA } from './constants.js';
import { MethodCallContext } from './method-context.js';
import { checkKey, tagsFor, ttlFor, type DogpileDefaults, type ResolvedCachedOptions } from './options.js';

type Method = (...args: unknown[]) => unknown;

/** Provider instances whose `@Cached` methods are already wrapped (by any module instance). */
const wrapped = new WeakSet<object>();

/**
 * Wraps the `@Cached` methods of every singleton provider instance so that calls go through
 * `cache.getOrCompute`: one run per key for all concurrent callers (and processes), the result
 * kept for the TTL. The key is `Class.method(<arguments as JSON>)`, or what the `key` function
 * returns for a `MethodCallContext` (used as is, so `cache.delete(key)` invalidates it).
 * Wrapped methods return a Promise. Request-scoped and transient providers are left alone.
 *
 * Returns how many methods were wrapped.
 */
export function cacheProviderMethods(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  reflector: Reflector,
  cache: DogpileCache,
  defaults: DogpileDefaults,
): number {
  let count = 0;
  for (const wrapper of discovery.getProviders()) {
    const instance: unknown = wrapper.instance;
    if (instance === null || typeof instance !== 'object' || wrapped.has(instance)) continue;
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) continue;
    const proto = Object.getPrototypeOf(instance) as object | null;
    if (proto === null || proto === Object.prototype) continue;
    for (const name of scanner.getAllMethodNames(proto)) {
      const original = (proto as Record<string, unknown>)[name];
      if (typeof original !== 'function') continue;
      const options = reflector.get<ResolvedCachedOptions | undefined>(CACHED_METADATA, original as Method);
      if (options === undefined) continue;
      const cls = (instance as { constructor: Type<unknown> }).constructor;
      (instance as Record<string, unknown>)[name] = cachedMethod(cls, name, original as Method, options, cache, defaults);
      count++;
    }
    wrapped.add(instance);
  }
  return count;
}

function cachedMethod(
  cls: Type<unknown>,
  name: string,
  original: Method,
  options: ResolvedCachedOptions,
  cache: DogpileCache,
  defaults: DogpileDefaults,
): Method {
  const label = `${cls.name}.${name}`;
  const cached = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
    const context = new MethodCallContext(cls, original, args);
    let key: string | undefined;
    if (options.key !== undefined) {
      key = checkKey(await options.key(context));
      if (key === undefined) return original.apply(this, args);
    } else {
      key = `${label}(${argumentsKey(label, args)})`;
    }
    const ttl = await ttlFor(options, defaults, context);
    const tags = await tagsFor(options.tags, context);
    const scoped = options.namespace === undefined ? cache : cache.namespace(options.namespace);
    return scoped.getOrCompute(key, () => original.apply(this, args), { ttl, ...options.freshness, ...(tags === undefined ? {} : { tags }) });
  };
  Object.defineProperty(cached, 'name', { value: name });
  return cached;
}

function argumentsKey(label: string, args: unknown[]): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(args);
  } catch (cause) {
    throw new InvalidOptionError('key', `the arguments of ${label} cannot be turned into a key as JSON; give @Cached({ key })`, { cause });
  }
  return json.slice(1, -1);
}
