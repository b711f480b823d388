import { spreadTtl } from './jitter.js';
import { judged, staleSince, stampVerdict, untouchedBy, type StampVerdict, type TagStamp } from './tags.js';
import type { Backend, Commit, Lookup, LookupRequest, Outcome, Store, StoredEntry, TagStamps } from './types.js';

/** What a cache adds to the store it writes through: its generations and its write rules. */
export interface StampRules {
  /** The generation names of the cache's chain (root first), see generations.ts. */
  generations: readonly string[];
  /** Where the generation stamps live (one store for a cache and all its namespaces). */
  stamps: TagStamps;
  /**
   * Reads generation stamps once, for one read, without following their channels (one GET
   * each), while `stamps.load` (which subscribes first) runs in the background; absent:
   * `stamps.load`.
   */
  readOnce?: (names: readonly string[]) => Promise<TagStamp[]>;
  /** `jitter` (0: off). */
  jitter: number;
  /** The longest life of a tagged entry (`tagStampTtl`): a spread TTL stays within it. */
  tagStampTtl: number;
}

type Found = Extract<Lookup, { kind: 'hit' | 'stale' }>;

/**
 * A store seen through the invalidation stamps of its entries: the generations of the cache's
 * chain (written by `clear()` of the cache or of an enclosing one) and the entry's own tags
 * (written by `invalidateTags`). Both are stamps, judged by one rule (`stampVerdict`): an
 * entry whose run began at or before one is a miss, or stale since it with `stale: true`.
 * O(1) whatever the number of entries: nothing is written per entry, every read is judged.
 * The stamps are held in process and kept up to date by their channels, so a read in memory
 * pays a lookup per stamp; one not held yet is read from the store. Every stored entry's TTL
 * is spread by `jitter`.
 *
 * A stored entry that the lookup script found fresh but a stamp made a miss or stale is looked
 * up again past its value, or as if expired, so the lead of its refresh is taken in the same
 * way as for an entry past its `ttl`.
 */
export class StampedBackend implements Backend {
  readonly distributed: boolean;
  readonly peekLayer: 'store' | 'l1';
  readonly holdsInMemory: boolean;
  /** The store's clock itself (no call through this layer). */
  readonly now: () => number;
  /** The reads of generation stamps in flight: following them, and reading them once. */
  private loading: Promise<TagStamp[]> | undefined;
  private reading: Promise<TagStamp[]> | undefined;
  /** The stamps held here, by name (made once: a hit in memory allocates nothing). */
  private readonly heldGeneration = (name: string): TagStamp | undefined => this.rules.stamps.known(name);
  private readonly heldTag = (tag: string): TagStamp | undefined => this.inner.tagStamps.known(tag);

  constructor(
    private readonly inner: Store,
    private readonly rules: StampRules,
  ) {
    this.distributed = inner.distributed;
    this.peekLayer = inner.peekLayer;
    this.holdsInMemory = inner.holdsInMemory;
    this.now = inner.now;
  }

  available(): boolean {
    return this.inner.available();
  }

  withKnownStamps(entry: StoredEntry): StoredEntry | undefined {
    return this.judgeHeld(entry, false);
  }

  /** A hit in process memory only while every stamp of the entry is held here; otherwise the caller goes on to the store. */
  peek(key: string): StoredEntry | undefined {
    const entry = this.inner.peek(key);
    if (entry === undefined) return undefined;
    // The common hit, an entry without tags that no generation of the chain judges, builds no verdict.
    if (entry.tags === undefined && untouchedBy(entry, this.rules.generations, this.rules.stamps)) return entry;
    return this.judgeHeld(entry, false);
  }

  /** The fallback while the store is unusable: dropped only when a stamp held here says so. */
  peekStale(key: string): StoredEntry | undefined {
    const entry = this.inner.peekStale(key);
    return entry === undefined ? undefined : this.judgeHeld(entry, true);
  }

  forget(key?: string): void {
    this.inner.forget(key);
  }

  keep(key: string, entry: StoredEntry, left: number, staleLeft?: number): void {
    if (this.heldVerdict(entry, true) !== 'ok') return;
    this.inner.keep(key, entry, left, staleLeft);
  }

  async lookup(request: LookupRequest): Promise<Lookup> {
    this.follow();
    const found = await this.inner.lookup(request);
    if (found.kind !== 'hit' && found.kind !== 'stale') return found;
    const verdict = await this.verdict(found.entry);
    if (verdict === 'ok') return found;
    if (found.kind === 'stale') return typeof verdict === 'number' ? { ...found, entry: staleSince(found.entry, verdict) } : this.pastGone(request, found);
    if (verdict === 'gone') return this.lookupPast(request, found.entry);
    // Stale by invalidation: look again as if past its expiry, so the refresh's lead is taken (or its leader's lock told).
    const again = await this.inner.lookup({ ...request, skip: undefined, expired: true });
    if (again.kind !== 'stale') return again;
    if (again.entry.createdAt === found.entry.createdAt) return { ...again, entry: staleSince(again.entry, Math.min(verdict, again.entry.createdAt + again.entry.ttl)) };
    // Meanwhile a new value was stored (another process refreshed it). Unless it too is past
    // its time, it is the answer, and a lead taken on it is handed back at once.
    const newer = await this.verdict(again.entry);
    if (newer === 'ok' && this.inner.now() < again.entry.createdAt + again.entry.ttl) {
      if (again.lead) await this.inner.commit(request.key, request.token, { mode: 'release' });
      return { kind: 'hit', entry: again.entry };
    }
    if (newer === 'gone') return this.pastGone(request, again);
    return typeof newer === 'number' ? { ...again, entry: staleSince(again.entry, newer) } : again;
  }

  commit(key: string, token: string, commit: Commit): Promise<boolean> {
    if (commit.mode === 'store') spreadTtl(commit.entry, this.rules.jitter, this.rules.tagStampTtl);
    return this.inner.commit(key, token, commit);
  }

  // The coordinator's steps that no stamp judges: the store's own.

  tryLead(key: string, token: string, lockTtl: number): Promise<boolean> {
    return this.inner.tryLead(key, token, lockTtl);
  }

  renew(key: string, token: string, lockTtl: number): Promise<boolean> {
    return this.inner.renew(key, token, lockTtl);
  }

  live(key: string): boolean {
    return this.inner.live(key);
  }

  listen(key: string, listener: (outcome: Outcome | null) => void): Promise<(atOnce?: boolean) => void> {
    return this.inner.listen(key, listener);
  }

  /** A value a leader shared, not stored, read once by its waiters: judged by no stamp, as an announced value is not. */
  getShared(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    return this.inner.getShared(key);
  }

  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    this.follow();
    return this.inner.get(key).then((found) => {
      if (found === undefined || 'corrupt' in found) return found;
      const verdict = this.verdict(found);
      return typeof verdict === 'object' ? verdict.then((read) => judged(found, read)) : judged(found, verdict);
    });
  }

  /** `get` of many keys: each entry judged by the stamps as `get` judges it; stamps not held here read once for all. */
  async getMany(keys: readonly string[]): Promise<(StoredEntry | { corrupt: Error } | undefined)[]> {
    this.follow();
    const found = await this.inner.getMany(keys);
    let pending: Promise<void>[] | undefined;
    for (let i = 0; i < found.length; i++) {
      const entry = found[i];
      if (entry === undefined || 'corrupt' in entry) continue;
      const verdict = this.verdict(entry);
      if (typeof verdict !== 'object') found[i] = judged(entry, verdict);
      else
        (pending ??= []).push(
          verdict.then((read) => {
            found[i] = judged(entry, read);
          }),
        );
    }
    if (pending !== undefined) await Promise.all(pending);
    return found;
  }

  set(key: string, entry: StoredEntry, write?: boolean): Promise<void> {
    spreadTtl(entry, this.rules.jitter, this.rules.tagStampTtl);
    return this.inner.set(key, entry, write);
  }

  delete(key: string): Promise<boolean> {
    return this.inner.delete(key);
  }

  invalidateTags(tags: readonly string[], stale: boolean, keepFor: number): Promise<void> {
    return this.inner.tagStamps.invalidate(tags, stale, keepFor);
  }

  tagStamps(tags: readonly string[]): Promise<TagStamp[]> {
    return this.inner.tagStamps.load(tags);
  }

  /**
   * Stamps this cache's generation (the last of its chain) with the store's time, as
   * `invalidateTags` stamps a tag: every entry of the cache and of the namespaces inside it
   * whose run began before becomes a miss, or stale with `stale`; every process hears of it on
   * the stamp's channel.
   */
  clear(stale: boolean, keepFor: number): Promise<void> {
    const own = this.rules.generations[this.rules.generations.length - 1]!;
    return this.rules.stamps.invalidate([own], stale, keepFor);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /**
   * A stale value found invalidated (`gone`) is no fallback: the lead taken on it leads a miss;
   * else wait for the leader, or look past the value.
   */
  private pastGone(request: LookupRequest, found: Extract<Lookup, { kind: 'stale' }>): Lookup | Promise<Lookup> {
    if (found.lead) return { kind: 'lead' };
    if (found.remaining >= 0) return { kind: 'wait', remaining: found.remaining };
    return this.lookupPast(request, found.entry);
  }

  /**
   * Looks again past `invalidated` only: if another process stored a newer value meanwhile
   * (it led the recompute first), that value is the answer, not a second lead.
   */
  private async lookupPast(request: LookupRequest, invalidated: StoredEntry): Promise<Lookup> {
    const again = await this.inner.lookup({ ...request, skip: { createdUpTo: invalidated.createdAt } });
    if (isFound(again) && (await this.verdict(again.entry)) === 'gone') {
      // The newer value is invalidated too (another invalidation since): look past it as well.
      return this.inner.lookup({ ...request, skip: { createdUpTo: again.entry.createdAt } });
    }
    return again;
  }

  /** What the entry's stamps make of it: from the stamps held here, else read from the store. */
  private verdict(entry: StoredEntry): StampVerdict | Promise<StampVerdict> {
    return this.heldVerdict(entry, false) ?? this.readVerdict(entry);
  }

  /**
   * What the stamps held here make of `entry`: the chain's generations, then its tags. With a
   * stamp not held here, undefined, or if `lenient`, the verdict of the stamps that are.
   */
  private heldVerdict(entry: StoredEntry, lenient: boolean): StampVerdict | undefined {
    let verdict = stampVerdict(entry, this.rules.generations, this.heldGeneration);
    if (verdict === undefined) {
      if (!lenient) return undefined;
      verdict = 'ok';
    }
    const tags = entry.tags;
    if (tags === undefined) return verdict;
    const tagged = stampVerdict(entry, tags, this.heldTag, verdict);
    return tagged === undefined && lenient ? verdict : tagged;
  }

  /** `entry` as the stamps held here make it; with a stamp not held here, `entry` if `lenient`, else undefined. No allocation unless the entry is stale. */
  private judgeHeld(entry: StoredEntry, lenient: boolean): StoredEntry | undefined {
    const verdict = this.heldVerdict(entry, lenient);
    return verdict === undefined ? undefined : judged(entry, verdict);
  }

  /** The verdict of the stamps read from the store (the chain's and the tags' at once), for those not held here. */
  private async readVerdict(entry: StoredEntry): Promise<StampVerdict> {
    const tags = entry.tags;
    const names = this.rules.generations;
    const [generations, tagStamps] = await Promise.all([this.generationStamps(), tags === undefined ? undefined : this.inner.tagStamps.load(tags)]);
    const byGeneration = stampVerdict(entry, names, (name) => generations[names.indexOf(name)])!;
    return tags === undefined ? byGeneration : stampVerdict(entry, tags, (tag) => tagStamps![tags.indexOf(tag)], byGeneration)!;
  }

  private holdsGenerations(): boolean {
    for (const name of this.rules.generations) if (this.rules.stamps.known(name) === undefined) return false;
    return true;
  }

  /**
   * Starts following the chain's stamps (read from the store, their channels subscribed) in the
   * background, if they are not held here yet: called as a read is sent, so that by the time a
   * value is found they are usually held. A process does it once (again after its subscriber
   * connection came back).
   */
  private follow(): void {
    if (this.loading !== undefined || this.holdsGenerations()) return;
    const loading = this.rules.stamps.load(this.rules.generations);
    this.loading = loading;
    const done = () => {
      if (this.loading === loading) this.loading = undefined;
    };
    loading.then(done, done);
  }

  /**
   * The chain's stamps, asked once a value was found: held here, or else read once from the
   * store (one read shared by the reads in flight; a round trip the first time a process
   * finds a value before it follows the stamps).
   */
  private generationStamps(): Promise<TagStamp[]> | TagStamp[] {
    if (this.holdsGenerations()) return this.rules.generations.map((name) => this.rules.stamps.known(name)!);
    this.follow();
    const readOnce = this.rules.readOnce;
    if (readOnce === undefined) return this.loading ?? this.rules.stamps.load(this.rules.generations);
    if (this.reading === undefined) {
      const reading = readOnce(this.rules.generations);
      this.reading = reading;
      const done = () => {
        if (this.reading === reading) this.reading = undefined;
      };
      reading.then(done, done);
    }
    return this.reading;
  }
}

function isFound(lookup: Lookup): lookup is Found {
  return lookup.kind === 'hit' || lookup.kind === 'stale';
}
