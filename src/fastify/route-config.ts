/**
 * A Fastify route's own settings (`config.dogpile`), declared once and checked when the route
 * is added: its TTL and its stale-serving options over the plugin's and the cache's.
 */
import type { Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { checkKnownOptions } from '../shared/known-options.js';
import { durationOrZero, optionNames, type OptionTable } from '../shared/option-table.js';
import { FRESHNESS_OVERRIDE_TABLE, type FreshnessOptions } from '../core/freshness.js';
import type { DogpileCache } from '../core/cache.js';
import { freshnessOver, pickFreshness } from '../http/options.js';

/**
 * Per-route settings: `config: { dogpile: { ttl: '5m', staleWhileRevalidate: '1m' } }`, or
 * `config: { dogpile: false }`. The stale-serving options override the plugin's for this route.
 */
export interface DogpileRouteConfig extends FreshnessOptions {
  /** How long this route's responses stay cached; overrides the plugin's `ttl`. */
  ttl: Duration;
}

/**
 * A route's `config.dogpile`, declared once. `ttl` is checked below with the route's name in
 * the message; the stale-serving options over the plugin's and the cache's.
 */
const ROUTE_CONFIG_TABLE = {
  ttl: { check: durationOrZero, doc: "how long this route's responses stay cached; overrides the plugin's `ttl`" },
  ...FRESHNESS_OVERRIDE_TABLE,
} satisfies OptionTable<DogpileRouteConfig>;

const ROUTE_CONFIG_NAMES = optionNames(ROUTE_CONFIG_TABLE);

export function routeSettings(config: unknown, fallback: number, plugin: FreshnessOptions, route: string, cache: DogpileCache | undefined): { ttl: number; freshness: FreshnessOptions } | false {
  if (config === undefined || config === null) return { ttl: fallback, freshness: plugin };
  if (config === false) return false;
  if (typeof config !== 'object' || Array.isArray(config)) {
    throw new InvalidOptionError('config.dogpile', `expected { ttl } or false on route ${route}`);
  }
  checkKnownOptions(config, ROUTE_CONFIG_NAMES, 'config.dogpile.');
  const { ttl, ...rest } = config as Partial<DogpileRouteConfig>;
  const freshness = { ...plugin, ...pickFreshness(rest, 'config.dogpile.') };
  pickFreshness(freshness, 'config.dogpile.');
  if (cache) freshnessOver(cache, freshness, 'config.dogpile.');
  return { ttl: ttl === undefined ? fallback : ROUTE_CONFIG_TABLE.ttl.check(ttl, `config.dogpile.ttl (route ${route})`), freshness };
}
