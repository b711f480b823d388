import type { Duration } from '../shared/duration.js';
import { InvalidOptionError } from '../shared/errors.js';
import { duration, durationOrZero, optionNames, positiveNumber, resolveFields, switchOrTable, type Check, type OptionRow, type OptionTable, type ResolvedTable } from '../shared/option-table.js';
import type { StoredEntry } from '../store/types.js';

/**
 * The life of an entry past its `ttl` (see "The life of an entry" in docs/design.md): fresh until
 * `createdAt + ttl`; then, for `staleWhileRevalidate`, served at once while one refresh runs;
 * for `staleIfError`, served when a refresh or a miss fails; gone after the longer of the two.
 */

/** The stale-serving options as the user gives them (createCache, per call, adapters). */
export interface FreshnessOptions {
  /** After `ttl`, serve the stale value at once for this long while one refresh runs in the background. @default 0 */
  staleWhileRevalidate?: Duration;
  /** After `ttl`, serve the stale value for this long when a refresh or a miss fails. @default 0 */
  staleIfError?: Duration;
  /** After a failed refresh, no new attempt for this long, fleet-wide (the stale value is served). @default 1000 (ms) */
  failSafeRetry?: Duration;
  /** With a stale value at hand, callers waiting for a loader get it after this long; the loader goes on. */
  softTimeout?: Duration;
  /** The loader is given up after this long: its signal aborts with `LoaderTimeoutError`. */
  hardTimeout?: Duration;
  /** Probabilistic early refresh (XFetch) of a value about to expire; `beta` scales how early. @default false */
  earlyRefresh?: boolean | { beta?: number };
}

/** Resolved: milliseconds, 0 for "off". */
export interface FreshnessRules {
  staleWhileRevalidate: number;
  staleIfError: number;
  failSafeRetry: number;
  softTimeout: number;
  hardTimeout: number;
  /** XFetch's β; 0 when early refresh is off. */
  earlyRefreshBeta: number;
}

export const FRESHNESS_DEFAULTS: FreshnessRules = {
  staleWhileRevalidate: 0,
  staleIfError: 0,
  failSafeRetry: 1000,
  softTimeout: 0,
  hardTimeout: 0,
  earlyRefreshBeta: 0,
};

/** `earlyRefresh: { ... }`: XFetch's β. */
export const EARLY_REFRESH_TABLE = {
  beta: { default: 1, check: positiveNumber, doc: 'how early a value is refreshed (XFetch β)', shown: '`1`' },
} satisfies OptionTable<{ beta?: number }>;

/** The stale-serving options, declared once (createCache, per call, adapters); resolved in ms, 0 for "off". */
export const FRESHNESS_TABLE = {
  staleWhileRevalidate: { default: FRESHNESS_DEFAULTS.staleWhileRevalidate, check: durationOrZero, shown: '`0` (off)', doc: 'after `ttl`, serve the stale value at once while one refresh runs' },
  staleIfError: { default: FRESHNESS_DEFAULTS.staleIfError, check: durationOrZero, shown: '`0` (off)', doc: 'after `ttl`, serve the stale value when a refresh or a miss fails' },
  failSafeRetry: { default: FRESHNESS_DEFAULTS.failSafeRetry, check: duration, shown: '`1000` ms', doc: 'after a failed refresh, no new attempt for this long, fleet-wide' },
  softTimeout: { default: FRESHNESS_DEFAULTS.softTimeout, check: duration, shown: 'none', doc: 'with a stale value at hand, waiting callers get it after this long' },
  hardTimeout: { default: FRESHNESS_DEFAULTS.hardTimeout, check: duration, shown: 'none', doc: 'the loader is given up after this long (`LoaderTimeoutError`)' },
  earlyRefresh: {
    default: FRESHNESS_DEFAULTS.earlyRefreshBeta,
    check: switchOrTable(EARLY_REFRESH_TABLE, { off: 0, map: (r) => r.beta }),
    shown: '`false`',
    doc: 'probabilistic early refresh (XFetch) of a value about to expire',
  },
} satisfies OptionTable<FreshnessOptions>;

/**
 * The stale-serving options where they override the cache's (adapters, decorators): each
 * checked by its row of `FRESHNESS_TABLE` and kept as given; omitted, the cache's applies.
 */
export const FRESHNESS_OVERRIDE_TABLE = Object.fromEntries(
  Object.entries(FRESHNESS_TABLE).map(([name, row]) => [name, { check: (value: unknown, option: string) => (row.check(value, option), value), shown: "the cache's", doc: row.doc }]),
) as { readonly [K in keyof FreshnessOptions]-?: OptionRow<FreshnessOptions[K]> & { check: Check<NonNullable<FreshnessOptions[K]>> } };

export const FRESHNESS_OPTION_NAMES = optionNames(FRESHNESS_TABLE) as readonly (keyof FreshnessOptions)[];

/** Validates the stale-serving options (`InvalidOptionError` naming the option) over `defaults`. */
export function resolveFreshness(o: FreshnessOptions, defaults: FreshnessRules): FreshnessRules {
  return freshnessRules(resolveFields(FRESHNESS_TABLE, o, { defaults: { ...defaults, earlyRefresh: defaults.earlyRefreshBeta } }));
}

/** The rules of stale-serving options resolved by their rows (in `FRESHNESS_TABLE` or a table that holds its rows), checked across. */
export function freshnessRules(o: ResolvedTable<typeof FRESHNESS_TABLE>): FreshnessRules {
  return checkFreshnessRules({
    staleWhileRevalidate: o.staleWhileRevalidate,
    staleIfError: o.staleIfError,
    failSafeRetry: o.failSafeRetry,
    softTimeout: o.softTimeout,
    hardTimeout: o.hardTimeout,
    earlyRefreshBeta: o.earlyRefresh,
  });
}

/** The check across the stale-serving options: `softTimeout` shorter than `hardTimeout`. */
export function checkFreshnessRules(rules: FreshnessRules): FreshnessRules {
  if (rules.softTimeout > 0 && rules.hardTimeout > 0 && rules.softTimeout >= rules.hardTimeout) {
    throw new InvalidOptionError('softTimeout', `must be shorter than hardTimeout (${rules.hardTimeout} ms), got ${rules.softTimeout} ms`);
  }
  return rules;
}

/** How long an entry is kept past its `ttl`: the longer stale window. */
export function staleWindow(rules: FreshnessRules): number {
  return Math.max(rules.staleWhileRevalidate, rules.staleIfError);
}

export function expiresAt(entry: StoredEntry): number {
  return entry.createdAt + entry.ttl;
}

/** Fresh at `now` (ms since the epoch). An entry with no stale window is fresh as long as it is stored. */
export function isFresh(entry: StoredEntry, now: number): boolean {
  return !entry.stale || now < entry.createdAt + entry.ttl;
}

/** `isFresh` at this moment on the store's clock; reads the clock only for an entry kept past its TTL (one with a stale window). */
export function isFreshNow(entry: StoredEntry, now: () => number): boolean {
  return !entry.stale || now() < entry.createdAt + entry.ttl;
}

/** A stale entry may be served at once while it is refreshed (its own window, else the call's). */
export function withinRevalidate(entry: StoredEntry, now: number, rules: FreshnessRules): boolean {
  return now < expiresAt(entry) + (entry.revalidate ?? rules.staleWhileRevalidate);
}

/** A stale entry may be served instead of an error (its own window, else the call's). */
export function withinStaleIfError(entry: StoredEntry, now: number, rules: FreshnessRules): boolean {
  return now < expiresAt(entry) + (entry.staleIfError ?? rules.staleIfError);
}

/**
 * XFetch (Vattani, Chierichetti, Lowenstein, VLDB 2015): refresh early when
 * `now − Δ·β·ln(random()) ≥ expiresAt`. Δ is the loader duration stored with the entry.
 */
export function earlyRefreshDue(entry: StoredEntry, now: number, beta: number, random: () => number = Math.random): boolean {
  const delta = entry.delta ?? 0;
  if (beta <= 0 || delta <= 0) return false;
  return now - delta * beta * Math.log(random()) >= expiresAt(entry);
}
