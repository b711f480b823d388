import { InvalidOptionError } from '../shared/errors.js';
import type { StoredEntry } from './types.js';

/** The most tags one entry may carry. */
export const MAX_TAGS = 64;
/** The longest tag, in characters. */
export const MAX_TAG_LENGTH = 1024;

/**
 * Checks a list of tags (`InvalidOptionError` naming `option`: not an array, an empty or
 * non-string tag, one longer than `MAX_TAG_LENGTH`, more than `MAX_TAGS` distinct tags) and
 * returns it without duplicates, in its order.
 */
export function validateTags(tags: unknown, option = 'tags'): string[] {
  if (!Array.isArray(tags)) throw new InvalidOptionError(option, `expected an array of strings, got ${tags === null ? 'null' : typeof tags}`);
  const seen = new Set<string>();
  for (let i = 0; i < tags.length; i++) {
    const tag: unknown = tags[i];
    if (typeof tag !== 'string') throw new InvalidOptionError(option, `tag ${i} is ${tag === null ? 'null' : typeof tag}; every tag must be a non-empty string`);
    if (tag.length === 0) throw new InvalidOptionError(option, `tag ${i} is empty; every tag must be a non-empty string`);
    if (tag.length > MAX_TAG_LENGTH) throw new InvalidOptionError(option, `tag ${i} is ${tag.length} characters long; the limit is ${MAX_TAG_LENGTH}`);
    seen.add(tag);
  }
  if (seen.size > MAX_TAGS) throw new InvalidOptionError(option, `${seen.size} distinct tags given; an entry carries at most ${MAX_TAGS}`);
  return [...seen];
}

/** Two tag lists as one (duplicates dropped); `InvalidOptionError` naming `option` past `MAX_TAGS`. */
export function mergeTags(a: readonly string[] | undefined, b: readonly string[] | undefined, option: string): readonly string[] | undefined {
  if (!b || b.length === 0) return a;
  if (!a || a.length === 0) return b;
  const merged = [...new Set([...a, ...b])];
  if (merged.length > MAX_TAGS) throw new InvalidOptionError(option, `${merged.length} distinct tags in all; an entry carries at most ${MAX_TAGS}`);
  return merged;
}

/**
 * When a tag was last invalidated (ms since the epoch, 0: never): `hard` by
 * `invalidateTags(tags)`, `stale` by `invalidateTags(tags, { stale: true })`.
 */
export interface TagStamp {
  hard: number;
  stale: number;
}

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
