import { SetMetadata, type CustomDecorator, type ExecutionContext } from '@nestjs/common';
import { describe } from '../../shared/duration.js';
import { InvalidOptionError } from '../../shared/errors.js';
import { validateKey } from '../../shared/keys.js';
import { CACHE_KEY_METADATA, CACHE_TTL_METADATA } from './constants.js';
import { durationOrZero } from '../../shared/option-table.js';

/** A function of the execution context that returns the cache key (falsy: not cached). */
export type CacheKeyFactory = (ctx: ExecutionContext) => string | Promise<string | undefined> | undefined;

/** A function of the execution context that returns the TTL in ms. */
export type CacheTTLFactory = (ctx: ExecutionContext) => Promise<number> | number;

/**
 * The key `CacheInterceptor` caches this handler's value under, in place of the request URL;
 * the only key outside HTTP (microservices, WebSockets). A string, or a function of the
 * execution context. A bad string is an `InvalidOptionError` naming `key`, when the decorator is applied.
 */
export const CacheKey = (key: string | CacheKeyFactory): CustomDecorator<string> => {
  if (typeof key === 'string') validateKey(key);
  else if (typeof key !== 'function') throw new InvalidOptionError('key', `expected a string or a function (context) => string, got ${describe(key)}`);
  return SetMetadata(CACHE_KEY_METADATA, key);
};

/**
 * How long `CacheInterceptor` keeps this handler's value (or every handler's of a controller):
 * ms, or a function of the execution context returning ms. `0` keeps it as long as the cache can
 * (`MAX_DURATION_MS`). A bad number is an `InvalidOptionError` naming `ttl`, when the decorator is applied.
 */
export const CacheTTL = (ttl: number | CacheTTLFactory): CustomDecorator<string> => {
  if (typeof ttl !== 'function') durationOrZero(ttl, 'ttl');
  return SetMetadata(CACHE_TTL_METADATA, ttl);
};
