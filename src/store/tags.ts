import type { StoredEntry, TagStamp } from './types.js';

export type { TagStamp } from './types.js';

export const NO_STAMP: TagStamp = Object.freeze({ hard: 0, stale: 0 });

/** The later of two stamps, field by field (stamps only move forward, so any order of arrival merges alike). */
export function laterStamp(a: TagStamp, b: TagStamp): TagStamp {
  if (a.hard >= b.hard && a.stale >= b.stale) return a;
  if (b.hard >= a.hard && b.stale >= a.stale) return b;
  return { hard: Math.max(a.hard, b.hard), stale: Math.max(a.stale, b.stale) };
}

/** A stamp as stored and announced: `hard:stale`. */
export function formatStamp(stamp: TagStamp): string {
  return `${stamp.hard}:${stamp.stale}`;
}

export function parseStamp(text: string | undefined | null): TagStamp {
  if (!text) return NO_STAMP;
  const colon = text.indexOf(':');
  const hard = Number(colon < 0 ? text : text.slice(0, colon));
  const stale = colon < 0 ? 0 : Number(text.slice(colon + 1));
  return { hard: Number.isFinite(hard) ? hard : 0, stale: Number.isFinite(stale) ? stale : 0 };
}

/**
 * What the stamps of its tags make of `entry`: `ok` (no tag invalidated since its loader
 * started), `gone` (a tag was invalidated since: a miss), or the time at which it became
 * stale (a tag was invalidated with `stale: true` since; an entry with no stale window is
 * then `gone`). An entry's loader started `delta` ms before `createdAt`: a value computed
 * while its tag was invalidated counts as computed before.
 */
export function tagVerdict(entry: StoredEntry, stampOf: (tag: string) => TagStamp): 'ok' | 'gone' | number {
  const tags = entry.tags;
  if (!tags) return 'ok';
  return stampVerdict(entry, tags.length, (i) => stampOf(tags[i]!));
}

/**
 * What `count` invalidation stamps (`stampAt(i)`: a tag's, a generation's) make of `entry`:
 * `ok`, `gone` (one was written at or after its run began, `createdAt` less `delta`), or the
 * time since which it is stale (an entry with no stale window is then `gone`).
 */
export function stampVerdict(entry: StoredEntry, count: number, stampAt: (i: number) => TagStamp): 'ok' | 'gone' | number {
  const started = entry.createdAt - (entry.delta ?? 0);
  let staleAt = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) {
    const stamp = stampAt(i);
    if (stamp.hard >= started) return 'gone';
    if (stamp.stale >= started && stamp.stale < staleAt) staleAt = stamp.stale;
  }
  if (staleAt === Number.POSITIVE_INFINITY) return 'ok';
  if (!(entry.stale ?? 0)) return 'gone';
  return staleAt;
}

/** `entry` as it reads once stale since `at` (ms since the epoch): its freshness ends there. */
export function staleSince(entry: StoredEntry, at: number): StoredEntry {
  const ttl = Math.max(0, Math.min(entry.ttl, at - entry.createdAt));
  // The entry is kept (and so may be served stale) as long as it was before.
  return { ...entry, ttl, stale: (entry.stale ?? 0) + (entry.ttl - ttl) };
}
