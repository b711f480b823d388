import { generationVerdict } from './generations.js';
import { spreadTtl } from './jitter.js';
import { staleSince, type TagStamp } from './tags.js';
import type { Backend, Commit, Lookup, OwnCoordination, StoredEntry, TagStamps } from './types.js';

/** What a cache adds to the backend it writes through: its generations and its write rules. */
export interface ScopeRules {
  /** The generation names of the cache's chain (root first), see generations.ts. */
  generations: readonly string[];
  /** Where the generation stamps live (one store for a cache and all its namespaces). */
  stamps: TagStamps;
  /**
   * Reads stamps once, for one read, without following their channels (one GET each), while
   * `stamps.load` (which subscribes first) runs in the background; absent: `stamps.load`.
   */
  readOnce?: (names: readonly string[]) => Promise<TagStamp[]>;
  /** `jitter` (0: off). */
  jitter: number;
  /** The longest life of a tagged entry (`tagStampTtl`): a spread TTL stays within it. */
  tagStampTtl: number;
}

/**
 * A backend seen through a cache's scope: every read is judged by the generation stamps of the
 * cache's chain (a `clear()` of the cache or of an enclosing one makes older entries a miss or
 * stale, as a tag's invalidation does: O(1), checked on read), and every stored entry's TTL is
 * spread by `jitter`. The stamps are held in process and kept up to date by their channels, so
 * a read in memory pays a lookup per stamp; one not held yet is read once from the store.
 */
export class ScopedBackend implements Backend {
  readonly distributed: boolean;
  readonly peekLayer: 'store' | 'l1';
  readonly holdsInMemory: boolean;
  readonly tagStamps: TagStamps;
  /** The store's own coordination steps: not passed through this layer. */
  readonly coordination: OwnCoordination;
  private loading: Promise<TagStamp[]> | undefined;
  private reading: Promise<TagStamp[]> | undefined;
  private plain: ScopedBackend | undefined;

  constructor(
    private readonly inner: Backend,
    private readonly rules: ScopeRules,
  ) {
    this.distributed = inner.distributed;
    this.now = inner.now;
    this.peekLayer = inner.peekLayer;
    this.holdsInMemory = inner.holdsInMemory;
    this.tagStamps = inner.tagStamps;
    this.coordination = inner.coordination;
  }

  /** The backend's reads past tag checks (the hit fast path), still judged by the generations. */
  get untagged(): Backend {
    const untagged = this.inner.untagged;
    if (untagged === undefined) return this;
    this.plain ??= new ScopedBackend(untagged, this.rules);
    return this.plain;
  }

  available(): boolean {
    return this.inner.available();
  }

  /** The inner store's clock itself (no call through this layer). */
  readonly now: () => number;

  withKnownTags(entry: StoredEntry): StoredEntry | undefined {
    const checked = this.inner.withKnownTags(entry);
    return checked === undefined ? undefined : this.judgeKnown(checked, false);
  }

  /** A hit in memory only while every generation stamp of the chain is held here. */
  peek(key: string): StoredEntry | undefined {
    const entry = this.inner.peek(key);
    return entry === undefined ? undefined : this.judgeKnown(entry, false);
  }

  forget(key?: string): void {
    this.inner.forget(key);
  }

  peekStale(key: string): StoredEntry | undefined {
    const entry = this.inner.peekStale(key);
    return entry === undefined ? undefined : this.judgeKnown(entry, true);
  }

  keep(key: string, entry: StoredEntry, left: number, staleLeft?: number): void {
    const stamps = this.knownStamps();
    if (stamps && generationVerdict(entry, stamps) !== 'ok') return;
    this.inner.keep(key, entry, left, staleLeft);
  }

  /** As `TaggedBackend.lookup` for tags: a value older than a generation is looked past, or refreshed as stale. */
  async lookup(key: string, token: string, lockTtl: number, skipValue: boolean | number, expired?: boolean, tryLead?: boolean): Promise<Lookup> {
    this.follow();
    const found = await this.inner.lookup(key, token, lockTtl, skipValue, expired, tryLead);
    if (found.kind !== 'hit' && found.kind !== 'stale') return found;
    const verdict = generationVerdict(found.entry, await this.stampsNow());
    if (verdict === 'ok') return found;
    if (found.kind === 'stale') {
      if (typeof verdict === 'number') return { ...found, entry: staleSince(found.entry, verdict) };
      if (found.lead) return { kind: 'lead' };
      if (found.remaining >= 0) return { kind: 'wait', remaining: found.remaining };
      return this.lookupPast(key, token, lockTtl, found.entry, expired, tryLead);
    }
    if (verdict === 'gone') return this.lookupPast(key, token, lockTtl, found.entry, expired, tryLead);
    // Stale since a `clear({ stale: true })`: look again as if past its expiry, so the refresh's lead is taken (or its leader's lock told).
    const again = await this.inner.lookup(key, token, lockTtl, false, true, tryLead);
    if (again.kind !== 'stale') return again;
    if (again.entry.createdAt === found.entry.createdAt) return { ...again, entry: staleSince(again.entry, Math.min(verdict, again.entry.createdAt + again.entry.ttl)) };
    // A newer value was stored meanwhile: unless it is past its time too, it is the answer.
    const newer = generationVerdict(again.entry, await this.stampsNow());
    if (newer === 'ok' && this.inner.now() < again.entry.createdAt + again.entry.ttl) {
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
    if (commit.mode === 'store') spreadTtl(commit.entry, this.rules.jitter, this.rules.tagStampTtl);
    return this.inner.commit(key, token, commit);
  }

  get(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    this.follow();
    return this.inner.get(key).then((found) => {
      if (found === undefined || 'corrupt' in found) return found;
      const stamps = this.stampsNow();
      if (Array.isArray(stamps)) return judged(found, generationVerdict(found, stamps));
      return stamps.then((read) => judged(found, generationVerdict(found, read)));
    });
  }

  set(key: string, entry: StoredEntry, write?: boolean): Promise<void> {
    spreadTtl(entry, this.rules.jitter, this.rules.tagStampTtl);
    return this.inner.set(key, entry, write);
  }

  delete(key: string): Promise<boolean> {
    return this.inner.delete(key);
  }

  /**
   * Stamps this cache's generation (the last of its chain) with the store's time: every entry
   * of the cache and of the namespaces inside it whose run began before becomes a miss, or
   * stale with `stale`; every process hears of it on the stamp's channel.
   */
  clear(stale: boolean, keepFor: number): Promise<void> {
    const own = this.rules.generations[this.rules.generations.length - 1]!;
    return this.rules.stamps.invalidate([own], stale, keepFor);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async lookupPast(key: string, token: string, lockTtl: number, invalidated: StoredEntry, expired: boolean | undefined, tryLead: boolean | undefined): Promise<Lookup> {
    const again = await this.inner.lookup(key, token, lockTtl, invalidated.createdAt, expired, tryLead);
    if ((again.kind === 'hit' || again.kind === 'stale') && generationVerdict(again.entry, await this.stampsNow()) === 'gone') {
      return this.inner.lookup(key, token, lockTtl, again.entry.createdAt, expired, tryLead);
    }
    return again;
  }

  /**
   * `entry` as the stamps held here make it; with a stamp not held here, `entry` if `lenient`,
   * else undefined. The hit path in memory: no allocation unless the entry is stale.
   */
  private judgeKnown(entry: StoredEntry, lenient: boolean): StoredEntry | undefined {
    const names = this.rules.generations;
    const started = entry.createdAt - (entry.delta ?? 0);
    let staleAt = Number.POSITIVE_INFINITY;
    for (let i = 0; i < names.length; i++) {
      const stamp = this.rules.stamps.known(names[i]!);
      if (stamp === undefined) return lenient ? entry : undefined;
      if (stamp.hard >= started) return undefined;
      if (stamp.stale >= started && stamp.stale < staleAt) staleAt = stamp.stale;
    }
    if (staleAt === Number.POSITIVE_INFINITY) return entry;
    return (entry.stale ?? 0) > 0 ? staleSince(entry, staleAt) : undefined;
  }

  private knownStamps(): TagStamp[] | undefined {
    const names = this.rules.generations;
    const stamps: TagStamp[] = [];
    for (const name of names) {
      const stamp = this.rules.stamps.known(name);
      if (stamp === undefined) return undefined;
      stamps.push(stamp);
    }
    return stamps;
  }

  /**
   * Starts following the chain's stamps (read from the store, their channels subscribed) in the
   * background, if they are not held here yet: called as a read is sent, so that by the time a
   * value is found they are usually held. A process does it once (again after its subscriber
   * connection came back).
   */
  private follow(): void {
    if (this.loading !== undefined || this.knownStamps() !== undefined) return;
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
  private stampsNow(): Promise<TagStamp[]> | TagStamp[] {
    const known = this.knownStamps();
    if (known !== undefined) return known;
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

function judged(entry: StoredEntry, verdict: 'ok' | 'gone' | number): StoredEntry | undefined {
  if (verdict === 'ok') return entry;
  return verdict === 'gone' ? undefined : staleSince(entry, verdict);
}
