/**
 * The `Cache-Status` response header (RFC 9211): one list member per cache, the cache's name
 * followed by parameters, in Structured Fields syntax (RFC 8941).
 */

/** `fwd` values of RFC 9211 §2.2. */
type ForwardReason = 'bypass' | 'method' | 'uri-miss' | 'vary-miss' | 'miss' | 'request' | 'stale' | 'partial';

export type CacheStatusEntry =
  | {
      /** Served from the cache; `ttl` (ms) is the remaining freshness, negative when served stale. */
      hit: true;
      ttl?: number;
      key?: string;
      detail?: string;
    }
  | {
      hit?: false;
      /** Why the request went to the handler. */
      fwd: ForwardReason;
      /** The status the handler answered with (`fwd-status`), e.g. 304 on a revalidation. */
      fwdStatus?: number;
      /** The response was stored. */
      stored?: boolean;
      /** The request was coalesced with another one's handler run. */
      collapsed?: boolean;
      /** The stored response's remaining freshness (ms), when stored. */
      ttl?: number;
      key?: string;
      /** Free-form detail (a bypass reason); a token when it is one, a string otherwise. */
      detail?: string;
    };

/** The name of this cache in `Cache-Status` when the adapter's option does not say otherwise. */
export const DEFAULT_CACHE_STATUS_NAME = 'dogpile-guard';

const TOKEN = /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*$/;

/** An sf-token when the text is one, else an sf-string (`"` and `\` escaped; characters outside printable ASCII become `?`). */
export function sfTokenOrString(text: string): string {
  if (TOKEN.test(text)) return text;
  return sfString(text);
}

/** An sf-string (RFC 8941 §3.3.3). */
function sfString(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/**
 * Why a cache name cannot be used (for option validation), or undefined when it can: it must
 * be non-empty and printable ASCII (it is then written as a token or a string).
 */
export function cacheStatusNameProblem(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'must be a non-empty string';
  if (/[^\x20-\x7e]/.test(name)) return 'must be printable ASCII';
  return undefined;
}

/** Remaining freshness in ms as RFC 9211 `ttl` seconds: rounded down, so a stale response (any negative ms) is never `ttl=0`. */
export function ttlSeconds(ms: number): number {
  const s = Math.floor(ms / 1000);
  return Object.is(s, -0) ? 0 : s;
}

let lastName = DEFAULT_CACHE_STATUS_NAME;
let lastNameItem = sfTokenOrString(DEFAULT_CACHE_STATUS_NAME);

/** A cache's name as a list item, remembered for the last name asked (one per cache, written on every response). */
function cacheName(name: string): string {
  if (name !== lastName) {
    lastNameItem = sfTokenOrString(name);
    lastName = name;
  }
  return lastNameItem;
}

/**
 * One `Cache-Status` member, e.g. `dogpile-guard; hit; ttl=42`,
 * `dogpile-guard; fwd=miss; stored; ttl=60`, `dogpile-guard; fwd=miss; collapsed`,
 * `dogpile-guard; fwd=bypass; detail=authorization`, `dogpile-guard; hit; ttl=-3` (stale).
 */
export function formatCacheStatus(entry: CacheStatusEntry, name: string = DEFAULT_CACHE_STATUS_NAME): string {
  // A hit's member (every hit has one): written at once.
  if (entry.hit && entry.key === undefined && entry.detail === undefined) {
    return entry.ttl !== undefined && Number.isFinite(entry.ttl) ? `${cacheName(name)}; hit; ttl=${ttlSeconds(entry.ttl)}` : `${cacheName(name)}; hit`;
  }
  const parts = [cacheName(name)];
  if (entry.hit) {
    parts.push('hit');
  } else {
    parts.push(`fwd=${entry.fwd}`);
    if (entry.fwdStatus !== undefined) parts.push(`fwd-status=${Math.trunc(entry.fwdStatus)}`);
    if (entry.stored) parts.push('stored');
    if (entry.collapsed) parts.push('collapsed');
  }
  if (entry.ttl !== undefined && Number.isFinite(entry.ttl)) parts.push(`ttl=${ttlSeconds(entry.ttl)}`);
  if (entry.key !== undefined) parts.push(`key=${sfString(entry.key)}`);
  if (entry.detail !== undefined) parts.push(`detail=${sfTokenOrString(entry.detail)}`);
  return parts.join('; ');
}

/**
 * A `Cache-Status` value with this cache's member appended after those of caches nearer the
 * origin (RFC 9211 §2: members are ordered from the origin towards the client).
 */
export function appendCacheStatus(existing: string | readonly string[] | undefined, member: string): string {
  if (existing === undefined) return member;
  const before = (typeof existing === 'string' ? [existing] : existing).map((s) => s.trim()).filter(Boolean);
  return [...before, member].join(', ');
}
