import { getOrComputeChannel } from '../shared/diagnostics.js';
import { EntryKind } from '../store/entry.js';
import type { Backend, StoredEntry } from '../store/types.js';
import { readMany, type BulkHost } from './bulk.js';
import { isPlainCall } from './call-options.js';
import type { CacheEmitter, ListenerFlag } from './events.js';
import type { Flights } from './flights.js';
import { isFreshNow } from './freshness.js';
import type { GuardedBackend } from './guarded-backend.js';
import type { FreshnessHints } from './hints.js';
import { NOT_FRESH } from './internal.js';
import type { ResolvedCacheOptions } from './options.js';

const notFresh = (): typeof NOT_FRESH => NOT_FRESH;

/**
 * The hits a cache answers without its miss protocol: a value process memory holds fresh (the
 * in-process store, or the L1 in front of Redis), and a plain GET of a value this process saw
 * fresh in Redis, judged by its stamps as the protocol's lookup judges it. `getOrCompute`'s
 * fast paths, `peek`, the HTTP guards' hits and `getOrComputeMany`'s hits read through here; a
 * closed cache does not call it.
 */
export class HitReads {
  private readonly backend: Backend;
  private readonly hints: FreshnessHints;
  private readonly guarded: GuardedBackend;
  private readonly options: ResolvedCacheOptions;
  private readonly events: CacheEmitter;
  /** The store's clock: what entries' times are on. */
  private readonly clock: () => number;

  /** `hits`: whether a `hit` listener is attached. */
  constructor(
    host: Pick<BulkHost, 'backend' | 'hints' | 'guarded' | 'options' | 'events' | 'clock'>,
    private readonly flights: Flights,
    private readonly hits: ListenerFlag,
  ) {
    ({ backend: this.backend, hints: this.hints, guarded: this.guarded, options: this.options, events: this.events, clock: this.clock } = host);
  }

  /** A value process memory holds fresh for `key`, as a hit (told to `hit` listeners); else undefined. */
  memory(key: string): StoredEntry | undefined {
    const local = this.hints.freshInMemory(key);
    if (local?.kind !== EntryKind.Value) return undefined;
    if (this.hits.listened) this.events.emit('hit', { key, layer: this.backend.peekLayer });
    return local;
  }

  /**
   * True when `found`, read with a plain GET of a key believed fresh, is a hit as it is (told to
   * `hit` listeners, kept in the L1): a value fresh now. The read judged it by its stamps (its
   * tags, its cache's generations: `StampedBackend.get`), as the protocol's lookup does, so an
   * invalidated entry reads gone or stale here. Anything else goes the full way (a miss, a
   * marker, a corrupt value, a stale one, whose refresh takes the protocol's lead).
   */
  stored(key: string, found: StoredEntry | { corrupt: Error } | undefined): found is StoredEntry {
    if (found === undefined || 'corrupt' in found || found.kind !== EntryKind.Value || !isFreshNow(found, this.clock)) return false;
    if (this.hits.listened) this.events.emit('hit', { key, layer: 'store' });
    if (this.options.l1) this.hints.remember(key, found);
    return true;
  }

  /** Whether `getOrCompute`'s read of a value seen fresh in Redis applies to `key`: no flight of this process for it, believed fresh, Redis usable. */
  seenFresh(key: string): boolean {
    return !this.flights.has(key) && this.hints.believedFresh(key) && this.guarded.usable(key);
  }

  /** One bounded GET of `key`, shared by concurrent readers of the key. */
  read(key: string): Promise<StoredEntry | { corrupt: Error } | undefined> {
    return this.flights.sharedRead(key, () => this.guarded.get(key));
  }

  /**
   * The read of `getOrCompute`'s second fast path where it applies (`seenFresh`), resolving the
   * value when it is a hit as it is (`stored`), `NOT_FRESH` for what goes the full way; undefined
   * at once where it does not apply. For the HTTP guards' hits without `l1`. (`getOrCompute`
   * chains `read` and `stored` itself, after its own look at the key's flight: going through
   * this call, one more promise, made 100 concurrent hits of one key 0.84–0.88× as fast.)
   */
  ifFresh(key: string): Promise<unknown> | undefined {
    if (!this.seenFresh(key)) return undefined;
    return this.read(key).then((found) => (this.stored(key, found) ? found.value : NOT_FRESH), notFresh);
  }

  /**
   * The keys of `keys` answered as hits as `getOrCompute`'s fast paths answer them, for a plain
   * call only: values fresh in process memory, then, in one read (`MGET`), the values this
   * process saw in Redis and believes fresh. A key with a flight of this process, and every key
   * of a read that fails, is left to the one-key protocol.
   */
  async plain(keys: readonly string[], loader: unknown, ttlOrOptions: unknown): Promise<Map<string, unknown>> {
    const hits = new Map<string, unknown>();
    if (this.options.freshness.earlyRefreshBeta !== 0 || getOrComputeChannel.hasSubscribers || !isPlainCall(keys[0], loader, ttlOrOptions)) return hits;
    const remote: string[] = [];
    for (const key of keys) {
      if (this.flights.has(key)) continue;
      const local = this.backend.holdsInMemory ? this.memory(key) : undefined;
      if (local !== undefined) hits.set(key, local.value);
      else if (this.hints.believedFresh(key) && this.guarded.usable(key)) remote.push(key);
    }
    if (remote.length === 0) return hits;
    let found;
    try {
      found = await readMany({ guarded: this.guarded }, remote);
    } catch {
      return hits;
    }
    for (let i = 0; i < remote.length; i++) {
      const entry = found[i];
      if (this.stored(remote[i]!, entry)) hits.set(remote[i]!, entry.value);
    }
    return hits;
  }
}
