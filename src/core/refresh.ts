import { monotonicNow } from '../shared/clock.js';
import { LoaderError } from '../shared/errors.js';
import { EntryKind } from '../store/entry.js';
import type { StoredEntry } from '../store/types.js';
import type { CallOptions } from './call-options.js';
import { staleAnswer, type ProtocolParts } from './answers.js';
import { earlyRefreshDue, withinRevalidate } from './freshness.js';
import type { Leader } from './lead.js';
import { RETRY, type Answered, type Shared } from './settled.js';
import type { Loader } from './types.js';

/** A refresh of a stored value running in this process. */
interface Refresh {
  settled: Promise<Answered<unknown>>;
  /** The stale value being refreshed. */
  entry: StoredEntry;
  /** Monotonic ms from which the key's channel reached this process (shared store). */
  liveAt: number | undefined;
  /** A lookup sent once the channel was live found `entry` still stored. */
  confirmed: boolean;
  /** The key's channel is followed (from the first call that asked for the stale value from memory). */
  following: boolean;
  /** The key was written, deleted or announced since: `entry` is no answer from memory. */
  superseded: boolean;
  unlisten: (() => void) | undefined;
  ended: boolean;
}

/**
 * Refreshes of stored values running in this process (background, inline or foreground), the
 * stale answers they allow while they run, and early refresh (XFetch) on hits.
 */
export class Refreshes {
  /** Refreshes running in this process, by key. */
  private readonly running = new Map<string, Refresh>();
  /** Keys whose early refresh this process tried and found led elsewhere: no new try until then (monotonic ms). */
  private readonly earlyThrottle = new Map<string, number>();

  constructor(
    private readonly parts: ProtocolParts,
    private readonly leader: Leader,
  ) {}

  /** Stops following the channels of the refreshes running here. */
  close(): void {
    for (const refresh of this.running.values()) refresh.unlisten?.();
  }

  has(key: string): boolean {
    return this.running.has(key);
  }

  /** The result of the refresh of `key` running here, if one runs. */
  settled<T>(key: string): Promise<Answered<T>> | undefined {
    return this.running.get(key)?.settled as Promise<Answered<T>> | undefined;
  }

  /**
   * `key` was written or deleted by this process: a refresh running here no longer answers
   * its stale value (the write is newer), and its result will not be stored over the write.
   */
  wrote(key: string): void {
    const refresh = this.running.get(key);
    if (refresh) refresh.superseded = true;
  }

  /**
   * Early refresh (XFetch): on a hit, a draw decides whether this caller starts a background
   * refresh now; it never waits for it. The lead lock makes simultaneous winners cost one run;
   * a process that finds the lock taken does not try again for Δ (at least 50 ms).
   */
  afterHit<T>(key: string, entry: StoredEntry, loader: Loader<T>, opts: CallOptions<T>): void {
    const { backend } = this.parts;
    const beta = opts.freshness.earlyRefreshBeta;
    if (beta <= 0 || entry.kind !== EntryKind.Value || this.running.has(key)) return;
    const now = backend.now();
    if (!earlyRefreshDue(entry, now, beta)) return;
    const throttled = this.earlyThrottle.get(key);
    if (throttled !== undefined && throttled > monotonicNow()) return;
    this.earlyThrottle.delete(key);
    if (!backend.usable(key)) return;
    const token = this.leader.nextToken();
    const gate = backend.tryLead(key, token, opts.lockTtl).then(
      async (led) => {
        if (!led) {
          if (this.earlyThrottle.size > 10_000) this.earlyThrottle.clear();
          this.earlyThrottle.set(key, monotonicNow() + Math.max(50, entry.delta ?? 0));
          return;
        }
        // The draw was made on `entry`: if another refresh replaced it meanwhile (and let go of
        // the lock), that refresh was this one; hand the lead back instead of running again.
        const current = await backend.get(key).catch(() => undefined);
        if (current === undefined || 'corrupt' in current || current.createdAt !== entry.createdAt) {
          await this.leader.commit(key, token, { mode: 'release' });
          return;
        }
        this.inBackground(key, token, loader, opts, entry);
      },
      () => {},
    );
    void gate;
  }

  /**
   * While this process refreshes `key` and its stale value is inside `staleWhileRevalidate`,
   * that value as the answer (callers of this process do not wait for the refresh either).
   */
  staleWhileRefreshing<T>(key: string, opts: CallOptions<T>): Shared<T> | undefined {
    const { backend } = this.parts;
    const running = this.running.get(key);
    if (running === undefined || running.superseded || !withinRevalidate(running.entry, backend.now(), opts.freshness)) return undefined;
    // Shared store: only while the key's channel would tell of a write, and once a lookup sent
    // while it did confirmed the stale value is still the stored one. The channel is followed
    // from the first call that asks (a refresh no one asks about again costs no subscription).
    if (backend.distributed) {
      if (!running.following) this.follow(key, running);
      if (!(running.confirmed && backend.live(key))) return undefined;
    }
    // A tag of the value invalidated since it was looked up: no longer an answer, stale or not.
    const entry = running.entry.tags === undefined ? running.entry : backend.withKnownTags(running.entry);
    if (entry === undefined) return undefined;
    return staleAnswer(this.parts, key, entry, 'revalidate');
  }

  /** Remembers a refresh running in this process, so its other callers join it and no second one starts here. */
  track<T>(key: string, entry: StoredEntry, refresh: Promise<Answered<T> | typeof RETRY>): Promise<Answered<T>> {
    const settled = refresh.then((r) => {
      if (r === RETRY) throw new LoaderError(`the lead of "${key}" was lost during its refresh`, { key });
      return r;
    });
    const tracked: Refresh = { settled: settled as Promise<Answered<unknown>>, entry, liveAt: undefined, confirmed: false, superseded: false, following: false, unlisten: undefined, ended: false };
    this.running.set(key, tracked);
    const forget = () => {
      tracked.ended = true;
      tracked.unlisten?.();
      if (this.running.get(key) === tracked) this.running.delete(key);
    };
    settled.then(forget, forget);
    return settled;
  }

  /** A lookup sent at `sentAt` found the stale value of a refresh running here still stored: answered from memory from now on, if the channel was live. */
  confirm(key: string, entry: StoredEntry, sentAt: number): void {
    const running = this.running.get(key);
    if (running === undefined || running.liveAt === undefined || sentAt < running.liveAt || running.entry.createdAt !== entry.createdAt) return;
    running.confirmed = true;
  }

  /** One refresh, detached from every caller: its result is stored and announced when it arrives. */
  inBackground<T>(key: string, token: string, loader: Loader<T>, opts: CallOptions<T>, entry: StoredEntry): void {
    // The callers' signals and waits do not apply to a refresh no one waits for.
    const own: CallOptions<T> = { ...opts, signal: undefined, background: true };
    this.track(key, entry, this.leader.lead(key, token, loader, own, entry)).catch(() => {
      /* reported by the refresh and loaderError events */
    });
  }

  /**
   * Follows the channel of a key refreshed here: any news of it while it refreshes (a write or
   * delete elsewhere, a reconnect) ends the stale answers from memory, and later callers ask Redis.
   */
  private follow(key: string, tracked: Refresh): void {
    tracked.following = true;
    this.parts.backend
      .listen(key, () => {
        tracked.superseded = true;
      })
      .then(
        (unlisten) => {
          if (tracked.ended) return unlisten();
          tracked.unlisten = unlisten;
          tracked.liveAt = monotonicNow();
        },
        () => {
          tracked.superseded = true;
        },
      );
  }
}
