import { InvalidOptionError } from '../shared/errors.js';
import { EntryKind } from '../store/entry.js';
import { mergeTags, validateTags } from '../shared/tag-names.js';
import type { Commit, StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import type { CacheDecision, LoaderContext } from './types.js';
import { toMs } from '../shared/duration.js';
import { staleWindow } from './freshness.js';
import { errorMessage } from './guarded-backend.js';

/*
 * What becomes of a loader's result: the call's `cacheable` verdict on it, and the entry to
 * store. Each of these may throw (a verdict that throws or is invalid, tags past the limits);
 * the lead that ran the loader lets go of its lock and announces the error then (lead()).
 */

/** What happens to a loader's result, for how long it is fresh, and what the result itself says of its stale windows and tags. */
export interface Decided {
  decision: 'store' | 'share' | 'private';
  ttl: number;
  /** The result's own stale windows (an HTTP response's directives), over the call's. */
  revalidate?: number;
  staleIfError?: number;
  /** The result's own tags, added to the call's. */
  tags?: readonly string[];
}

/** What a loader said of its own result through its context (`ctx.decide`, `ctx.setTtl`, `ctx.setTags`, `ctx.skip`). */
export interface Declared {
  verdict?: Decided;
  ttl?: number;
  tags?: string[];
}

/**
 * The context handed to one loader run, and what the loader declares through it: the run's
 * verdict is read from `declared` once the loader settles (decide()).
 */
export function loaderContext(key: string, signal: AbortSignal, stale?: { value: unknown; createdAt: number }): { context: LoaderContext; declared: Declared } {
  const declared: Declared = {};
  const context: LoaderContext = {
    key,
    signal,
    setTtl(ttl) {
      declared.ttl = toMs(ttl, 'ctx.setTtl');
    },
    setTags(tags) {
      declared.tags = [...(mergeTags(declared.tags, validateTags(tags, 'ctx.setTags'), 'ctx.setTags') ?? [])];
    },
    skip() {
      declared.verdict = { decision: 'share', ttl: 0 };
    },
    decide(decision) {
      declared.verdict = parseVerdict(decision, 0, 'ctx.decide');
    },
  };
  if (stale !== undefined) context.stale = stale;
  return { context, declared };
}

/**
 * The verdict on a loader's result: what the loader declared in its context, else the call's
 * `cacheable` verdict, else "store" (`undefined`: "share"); a ttl the loader set replaces the
 * verdict's, and tags it set join the verdict's.
 */
export function decide<T>(value: T, opts: CallOptions<T>, declared?: Declared): Decided {
  let decided: Decided;
  if (declared?.verdict !== undefined) decided = { ...declared.verdict, ttl: declared.verdict.ttl || opts.ttl };
  else if (opts.cacheable) decided = parseVerdict(opts.cacheable(value), opts.ttl, 'cacheable');
  else decided = { decision: value === undefined ? 'share' : 'store', ttl: opts.ttl };
  if (declared === undefined || decided.decision !== 'store') return decided;
  if (declared.ttl !== undefined) decided.ttl = declared.ttl;
  if (declared.tags !== undefined) decided.tags = mergeTags(decided.tags, declared.tags, 'ctx.setTags');
  return decided;
}

/** A `CacheDecision` checked and normalised; `ttl` (0: the call's) for the plain verdicts. */
function parseVerdict(decision: CacheDecision, ttl: number, option: string): Decided {
  if (decision === 'store' || decision === 'share' || decision === 'private') return { decision, ttl };
  if (typeof decision === 'object' && decision !== null && decision.decision === 'store') {
    const own = decision.ttl;
    if (typeof own !== 'number' || !(own > 0) || !Number.isFinite(own)) {
      throw new InvalidOptionError(option, `a { decision: 'store', ttl } verdict needs a ttl over 0 (ms), got ${String(own)}`);
    }
    const decided: Decided = { decision: 'store', ttl: own };
    const { staleWhileRevalidate, staleIfError } = decision;
    if (staleWhileRevalidate !== undefined || staleIfError !== undefined) {
      decided.revalidate = window(staleWhileRevalidate, 'staleWhileRevalidate', option);
      decided.staleIfError = window(staleIfError, 'staleIfError', option);
    }
    if (decision.tags !== undefined) decided.tags = validateTags(decision.tags, `${option}: tags`);
    return decided;
  }
  throw new InvalidOptionError(option, `must be 'store', 'share', 'private' or { decision: 'store', ttl }, got ${String(decision)}`);
}

function window(ms: number | undefined, name: string, option: string): number {
  if (ms === undefined) return 0;
  if (typeof ms !== 'number' || !(ms >= 0) || !Number.isFinite(ms)) throw new InvalidOptionError(option, `${name} must be a number of ms, 0 or more, got ${String(ms)}`);
  return ms;
}

/**
 * The entry of a value to store: fresh for its `ttl`, kept past it for the longer stale window
 * (the result's own windows, when it gave any, else the call's), with the call's and the
 * result's tags. Δ (the loader's duration) is stored where early refresh reads it, and with
 * tags (an invalidation during the run makes the value old); an entry with neither keeps
 * format version 1. A tagged entry lives at most `tagStampTtl`.
 */
export function valueEntry<T>(value: T, createdAt: number, decided: Decided, opts: CallOptions<T>, duration: number): StoredEntry {
  const tags = mergeTags(opts.tags, decided.tags, 'tags');
  const own = decided.revalidate !== undefined;
  let ttl = decided.ttl;
  let stale = own ? Math.max(decided.revalidate!, decided.staleIfError!) : staleWindow(opts.freshness);
  if (tags && ttl + stale > opts.tagStampTtl) {
    ttl = Math.min(ttl, opts.tagStampTtl);
    stale = Math.min(stale, opts.tagStampTtl - ttl);
  }
  const entry: StoredEntry = { kind: EntryKind.Value, value, createdAt, ttl, stale };
  // With tags, Δ is kept to the fraction: createdAt − Δ (when the run started) must not fall
  // into the millisecond of an invalidation that the run came after (see invalidateTags).
  if (tags) entry.delta = Math.max(0, duration);
  else if (opts.freshness.earlyRefreshBeta > 0) entry.delta = Math.max(1, Math.round(duration));
  if (own) {
    entry.revalidate = decided.revalidate!;
    entry.staleIfError = decided.staleIfError!;
  }
  if (tags) entry.tags = tags;
  return entry;
}

export function errorCommit(error: unknown): Commit {
  return { mode: 'error', name: errorName(error), message: errorMessage(error) };
}

export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'Error';
}
