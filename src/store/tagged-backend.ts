import { staleSince, tagVerdict, type TagStamp } from './tags.js';
import type { Backend, Commit, Lookup, OwnCoordination, StoredEntry, TagStamps } from './types.js';

/**
 * A backend whose reads respect tag invalidations: an entry carrying a tag invalidated after
 * its loader started is a miss, or, after `invalidateTags(tags, { stale: true })`, stale since
 * the invalidation. Nothing is written per entry: each read compares the entry's tags with
 * the tags' stamps (held in process and kept up to date by the backend's announcements, read
 * from the store once otherwise). Entries without tags pass through untouched.
 *
 * A stored entry that the lookup script found fresh but a stamp made a miss or stale is looked
 * up again past its value, or as if expired, so the lead of its refresh is taken in the same
 * way as for an entry past its `ttl`.
 */
export class TaggedBackend implements Backend {
  readonly distributed: boolean;
  readonly peekLayer: 'store' | 'l1';
  readonly holdsInMemory: boolean;
  readonly tagStamps: TagStamps;
  /** The store's own coordination steps: not passed through this layer. */
  readonly coordination: OwnCoordination;

  constructor(private readonly inner: Backend) {
    this.distributed = inner.distributed;
    this.peekLayer = inner.peekLayer;
    this.holdsInMemory = inner.holdsInMemory;
    this.tagStamps = inner.tagStamps;
    this.coordination = inner.coordination;
    this.now = inner.now;
  }

  /** The backend itself, for reads that check tags themselves (the hit fast path: an entry with tags goes the full way). */
  get untagged(): Backend {
    return this.inner;
  }

  available(): boolean {
    return this.inner.available();
  }

  /** The inner store's clock itself (no call through this layer). */
  readonly now: () => number;

  withKnownTags(entry: StoredEntry): StoredEntry | undefined {
    return entry.tags === undefined ? entry : this.knownVerdict(entry, false);
  }

  /** A hit in process memory only when every tag's stamp is held here; otherwise the caller goes on to the store. */
  peek(key: string): StoredEntry | undefined {
    const entry = this.inner.peek(key);
    if (entry?.tags === undefined) return entry;
    return this.knownVerdict(entry, false);
  }

  forget(key?: string): void {
    this.inner.forget(key);
  }

  /** The fallback while the store is unusable: dropped only when a stamp held here says so. */
  peekStale(key: string): StoredEntry | undefined {
    const entry = this.inner.peekStale(key);
    if (entry?.tags === undefined) return entry;
    return this.knownVerdict(entry, true);
  }

  keep(key: string, entry: StoredEntry, left: number, staleLeft?: number): void {
    if (entry.tags !== undefined) {
      const stamps = this.knownStamps(entry.tags);
      if (stamps && tagVerdict(entry, stampFrom(entry.tags, stamps)) !== 'ok') return;
    }
    this.inner.keep(key, entry, left, staleLeft);
  }

  async lookup(key: string, token: string, lockTtl: number, skipValue: boolean | number, expired?: boolean, tryLead?: boolean): Promise<Lookup> {
    const found = await this.inner.lookup(key, token, lockTtl, skipValue, expired, tryLead);
    if ((found.kind !== 'hit' && found.kind !== 'stale') || found.entry.tags === undefined) return found;
    const verdict = await this.verdict(found.entry);
    if (verdict === 'ok') return found;
    if (found.kind === 'stale') {
      if (typeof verdict === 'number') return { ...found, entry: staleSince(found.entry, verdict) };
      // Invalidated: the stale value is no fallback. The lead taken on it leads a miss; else wait for the leader, or look past the value.
      if (found.lead) return { kind: 'lead' };
      if (found.remaining >= 0) return { kind: 'wait', remaining: found.remaining };
      return this.lookupPast(key, token, lockTtl, found.entry, expired, tryLead);
    }
    if (verdict === 'gone') return this.lookupPast(key, token, lockTtl, found.entry, expired, tryLead);
    // Stale by invalidation: look again as if past its expiry, so the refresh's lead is taken (or its leader's lock told).
    const again = await this.inner.lookup(key, token, lockTtl, false, true, tryLead);
    if (again.kind !== 'stale') return again;
    if (again.entry.createdAt === found.entry.createdAt) return { ...again, entry: staleSince(again.entry, Math.min(verdict, again.entry.createdAt + again.entry.ttl)) };
    // Meanwhile a new value was stored (another process refreshed it). Unless it too is past
    // its time, it is the answer, and a lead taken on it is handed back at once.
    const newer = await this.verdict(again.entry);
    const past = this.inner.now() >= again.entry.createdAt + again.entry.ttl;
    if (newer === 'ok' && !past) {
      if (again.lead) await this.inner.commit(key, token, { mode: 'release' });
      return { kind: 'hit', entry: again.entry };
    }
    if (newer === 'gone') {
      if (again.lead) return { kind: 'lead' };
      return again.remaining >= 0 ? { kind: 'wait', remaining: again.remaining } : this.lookupPast(key, token, lockTtl, again.entry, expired, tryLead);
    }
    return typeof newer === 'number' ? { ...again, entry: staleSince(again.entry, newer) } : again;
  }

  commit(key: string, token: string, commit: Commit): Promise<boolean> {
    return this.inner.commit(key, token, commit);
  }

  async get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    const found = await this.inner.get(key);
    if (found === undefined || 'corrupt' in found || found.tags === undefined) return found;
    const verdict = await this.verdict(found);
    if (verdict === 'ok') return found;
    return verdict === 'gone' ? undefined : staleSince(found, verdict);
  }

  set(key: string, entry: StoredEntry, write?: boolean): Promise<void> {
    return this.inner.set(key, entry, write);
  }

  delete(key: string): Promise<boolean> {
    return this.inner.delete(key);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /**
   * Looks again past `invalidated` only: if another process stored a newer value meanwhile
   * (it led the recompute first), that value is the answer, not a second lead.
   */
  private async lookupPast(key: string, token: string, lockTtl: number, invalidated: StoredEntry, expired: boolean | undefined, tryLead: boolean | undefined): Promise<Lookup> {
    const again = await this.inner.lookup(key, token, lockTtl, invalidated.createdAt, expired, tryLead);
    if ((again.kind === 'hit' || again.kind === 'stale') && again.entry.tags !== undefined && (await this.verdict(again.entry)) === 'gone') {
      // The newer value is invalidated too (another invalidation since): look past it as well.
      return this.inner.lookup(key, token, lockTtl, again.entry.createdAt, expired, tryLead);
    }
    return again;
  }

  private async verdict(entry: StoredEntry): Promise<'ok' | 'gone' | number> {
    const tags = entry.tags!;
    const stamps = this.knownStamps(tags) ?? (await this.tagStamps.load(tags));
    return tagVerdict(entry, stampFrom(tags, stamps));
  }

  /** `entry` as the stamps held here make it; with a stamp not held here, `entry` if `lenient`, else undefined. */
  private knownVerdict(entry: StoredEntry, lenient: boolean): StoredEntry | undefined {
    const stamps = this.knownStamps(entry.tags!);
    if (!stamps) return lenient ? entry : undefined;
    const verdict = tagVerdict(entry, stampFrom(entry.tags!, stamps));
    if (verdict === 'ok') return entry;
    return verdict === 'gone' ? undefined : staleSince(entry, verdict);
  }

  private knownStamps(tags: readonly string[]): TagStamp[] | undefined {
    const stamps: TagStamp[] = [];
    for (const tag of tags) {
      const stamp = this.tagStamps.known(tag);
      if (stamp === undefined) return undefined;
      stamps.push(stamp);
    }
    return stamps;
  }
}

function stampFrom(tags: readonly string[], stamps: TagStamp[]): (tag: string) => TagStamp {
  return (tag) => stamps[tags.indexOf(tag)]!;
}
