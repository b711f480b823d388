import type { StoredEntry, TagStamp, TagStamps } from './types.js';

export type { TagStamp } from './types.js';

export const NO_STAMP: TagStamp = Object.freeze({ hard: 0, stale: 0 });

/** The later of two stamps, field by field (stamps only move forward, so any order of arrival merges alike). */
export function laterStamp(a: TagStamp, b: TagStamp): TagStamp {
  if (a.hard >= b.hard && a.stale >= b.stale) return a;
  if (b.hard >= a.hard && b.stale >= a.stale) return b;
  return { hard: Math.max(a.hard, b.hard), stale: Math.max(a.stale, b.stale) };
}

export function parseStamp(text: string | undefined | null): TagStamp {
  if (!text) return NO_STAMP;
  const colon = text.indexOf(':');
  const hard = Number(colon < 0 ? text : text.slice(0, colon));
  const stale = colon < 0 ? 0 : Number(text.slice(colon + 1));
  return { hard: Number.isFinite(hard) ? hard : 0, stale: Number.isFinite(stale) ? stale : 0 };
}

/**
 * What invalidation stamps make of an entry: `ok`, `gone` (a miss), or the time (ms since the
 * epoch, on the store's clock) since which it is stale.
 */
export type StampVerdict = 'ok' | 'gone' | number;

/**
 * What the stamps of its tags make of `entry` (see `stampVerdict`): `ok` (no tag invalidated
 * since its loader started), `gone` (a tag was invalidated since: a miss), or the time at which
 * it became stale (a tag was invalidated with `stale: true` since).
 */
export function tagVerdict(entry: StoredEntry, stampOf: (tag: string) => TagStamp): StampVerdict {
  const tags = entry.tags;
  if (!tags) return 'ok';
  return stampVerdict(entry, tags, stampOf)!;
}

/**
 * The one rule of invalidation stamps (a tag's, a cache's or namespace's generation): what the
 * stamps of `names` make of `entry`, on top of `since` (what other stamps made of it). `gone`
 * when one was written at or after its run began (`runStart`), else the earliest time since which
 * one makes it stale (an entry with no stale window is then `gone`), else `ok`. Undefined when
 * `stampOf` holds no stamp for a name met before any that makes it `gone`.
 */
export function stampVerdict(
  entry: StoredEntry,
  names: readonly string[],
  stampOf: (name: string) => TagStamp | undefined,
  since: StampVerdict = 'ok',
): StampVerdict | undefined {
  if (since === 'gone') return 'gone';
  const started = runStart(entry);
  let staleAt = since === 'ok' ? Number.POSITIVE_INFINITY : since;
  for (let i = 0; i < names.length; i++) {
    const stamp = stampOf(names[i]!);
    if (stamp === undefined) return undefined;
    if (writtenBefore(stamp, started)) continue;
    if (stamp.hard >= started) return 'gone';
    if (stamp.stale < staleAt) staleAt = stamp.stale;
  }
  if (staleAt === Number.POSITIVE_INFINITY) return 'ok';
  if (!(entry.stale ?? 0)) return 'gone';
  return staleAt;
}

/**
 * True when every stamp of `names` is held in `table` and each was written before `entry`'s run
 * began, so `stampVerdict` would say `ok`: the check of a hit in process memory, which builds no
 * verdict and stops at the first stamp that has a say.
 */
export function untouchedBy(entry: StoredEntry, names: readonly string[], table: TagStamps): boolean {
  const started = runStart(entry);
  for (let i = 0; i < names.length; i++) {
    const stamp = table.known(names[i]!);
    if (stamp === undefined || !writtenBefore(stamp, started)) return false;
  }
  return true;
}

/** When `entry`'s run began, for its stamps: `createdAt` less `delta` (a value computed while its stamp was written counts as computed before). */
function runStart(entry: StoredEntry): number {
  return entry.createdAt - (entry.delta ?? 0);
}

/** True when `stamp` (either of its times) was written before `started`: it says nothing of an entry whose run began then. */
function writtenBefore(stamp: TagStamp, started: number): boolean {
  return stamp.hard < started && stamp.stale < started;
}

/** `entry` as `verdict` makes it: itself, undefined (`gone`), or stale since the verdict's time. */
export function judged(entry: StoredEntry, verdict: StampVerdict): StoredEntry | undefined {
  if (verdict === 'ok') return entry;
  return verdict === 'gone' ? undefined : staleSince(entry, verdict);
}

/** `entry` as it reads once stale since `at` (ms since the epoch): its freshness ends there. */
export function staleSince(entry: StoredEntry, at: number): StoredEntry {
  const ttl = Math.max(0, Math.min(entry.ttl, at - entry.createdAt));
  // The entry is kept (and so may be served stale) as long as it was before.
  return { ...entry, ttl, stale: (entry.stale ?? 0) + (entry.ttl - ttl) };
}
