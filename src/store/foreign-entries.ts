import { debug } from '../shared/diagnostics.js';
import { UnknownSerializerError } from '../shared/errors.js';

/** The most keys remembered (a bound on memory; past it the oldest are forgotten). */
const MAX_KEYS = 10_000;

/**
 * Fresh entries this process cannot read (written by another serializer), by key. Such an
 * entry is reported once per key (a `corrupt` event with an `UnknownSerializerError`); while
 * it is fresh, this process looks past it (its callers are answered by a load of its own,
 * shared with the processes that wait on it) and never replaces it: a mixed fleet costs one
 * load per serializer, not a stampede of overwrites.
 */
export class ForeignEntries {
  /** The created-at and fresh-until (server's clock, ms) of the fresh entry of each key. */
  private readonly fresh = new Map<string, { createdAt: number; until: number }>();
  private readonly reported = new Set<string>();

  /**
   * Records the unreadable entry of `key` behind `error`; true when this is the first time
   * this process meets one for the key (report it), false when it was reported before.
   */
  met(key: string, error: UnknownSerializerError): boolean {
    const entry = error.entry;
    if (entry) {
      if (this.fresh.size >= MAX_KEYS) this.fresh.delete(this.fresh.keys().next().value!);
      this.fresh.set(key, { createdAt: entry.createdAt, until: entry.createdAt + entry.ttl });
    }
    if (this.reported.has(key)) return false;
    if (this.reported.size >= MAX_KEYS) this.reported.delete(this.reported.keys().next().value!);
    this.reported.add(key);
    if (debug.enabled) debug('unreadable key=%s: the entry was written with the "%s" serializer, this process has "%s"; loading here without replacing it', key, error.written, error.own ?? 'unnamed');
    return true;
  }

  /** The created-at of the fresh unreadable entry of `key` at `now` (to look past it), or undefined. */
  freshAt(key: string, now: number): number | undefined {
    const known = this.fresh.get(key);
    if (known === undefined) return undefined;
    if (known.until > now) return known.createdAt;
    this.fresh.delete(key);
    return undefined;
  }

  /** Whether `key` was reported (its unreadable entries are no longer news). */
  wasReported(key: string): boolean {
    return this.reported.has(key);
  }
}

/** `error` as reported for `key` (the codec that made it does not know the key). */
export function forKey(error: UnknownSerializerError, key: string): UnknownSerializerError {
  const keyed = new UnknownSerializerError(error.written, error.own, { key });
  keyed.entry = error.entry;
  return keyed;
}
