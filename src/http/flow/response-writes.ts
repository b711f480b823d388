import type { DogpileCache } from '../../core/cache.js';
import { storeComputed, storeOptions, type StoreOptions } from './cache-calls.js';
import type { CapturedResponse, SharedResponse } from './capture.js';
import { encodeResponse } from '../rules/response-format.js';
import { entryTags, renewedVerdict, responseVerdict, sameNames, type StoredFields, type StoreRules } from '../rules/response-store.js';
import type { ServableResponse } from './serve.js';
import { ORIGIN_ERROR_STATUSES } from './stale-on-error.js';
import type { LeaderRun } from './plan-types.js';
import { encodeVaryRecord, newGeneration, toVaryRecord, variantKey, type VaryRecord } from '../rules/vary-record.js';

/**
 * What the guard writes to its cache once a leader's response is complete: the bytes the
 * storage rules (`responseVerdict`, `renewedVerdict`) say to store, `Vary` records and
 * variants, a revalidation's renewal, the deletes of what a write invalidated. It holds the
 * state these writes need between requests of this process, and nothing else does.
 */
export class ResponseWrites {
  /**
   * The `VaryRecord`s this process is writing (a URL's key → its record), until the write has
   * landed: a request for another variant of the URL that arrives meanwhile finds no record in
   * the store yet, and takes this one's generation instead of making one that would orphan the
   * variant being stored.
   */
  private readonly writingRecords = new Map<string, VaryRecord>();
  /** Keys whose refresh here was answered with a response that may not be stored: until it settles, their stale copy is nobody's answer (RFC 5861 §3). */
  private readonly refusedRefreshes = new Set<string>();

  /**
   * @param cache The cache in use at the time of a write.
   * @param rules The storage rules at the time of a decision.
   */
  constructor(
    private readonly cache: () => DogpileCache,
    private readonly rules: () => StoreRules,
  ) {}

  /** Whether the refresh of `key` here was answered with a response that may not be stored, and has not settled yet. */
  refused(key: string): boolean {
    return this.refusedRefreshes.has(key);
  }

  /** The run for `key` has settled: its stale copy may be served again. */
  settled(key: string): void {
    this.refusedRefreshes.delete(key);
  }

  /** The leader's response is complete: the bytes to store and share, or null to share nothing. */
  finish(run: LeaderRun, response: CapturedResponse): SharedResponse | null {
    const { plan } = run;
    const verdict = responseVerdict(run, response, this.rules(), Date.now());
    if (!verdict.store) {
      if (verdict.refused && run.fallback !== undefined && !ORIGIN_ERROR_STATUSES.has(response.status)) this.refusedRefreshes.add(plan.key);
      return null;
    }
    const bytes = this.encode(verdict.fields);
    const { vary } = verdict;
    const madeUp = plan.record !== undefined && plan.madeUpRecord === true;
    if (vary.length > 0 && (madeUp || !sameNames(plan.record?.names, vary))) {
      // A response that varies, under a key that does not say so (or under a generation made up
      // before the URL's record could be read): stored as a variant, and the URL's key tells
      // every process what it varies on. The requests waiting here get it as it is.
      void this.storeVariant(run, vary, madeUp ? undefined : plan.record?.gen, bytes, verdict.storeFor, response.startedAt);
      return { bytes, decision: 'share' };
    }
    if (plan.record !== undefined) void this.refreshRecord(plan.base, plan.record);
    return { bytes, decision: verdict.decision };
  }

  /**
   * The handler's answer to a revalidation: the stored response renewed (304) or replaced.
   * `storesItself`: the run is outside the miss protocol, so the write is this one's; else the
   * cache stores what the loader's verdict says, with the route's stale windows.
   */
  finishRevalidation(run: LeaderRun, stored: ServableResponse, response: CapturedResponse, storesItself = true): SharedResponse | null {
    const { key } = run.plan;
    if (!storesItself) return response.status === 304 ? this.renewed(run, stored, response) : this.finish(run, response);
    if (response.status !== 304) {
      const shared = this.finish(run, response);
      const decision = shared?.decision;
      if (shared !== null && typeof decision === 'object') void storeComputed(this.cache(), key, shared.bytes, this.setOptions(run, decision.ttl, response.startedAt)).catch(() => {});
      // A response that may not be stored removes the stale one (RFC 9111 §4.4 allows it).
      else if (shared === null) void this.cache().delete(key).catch(() => {});
      // Stored by the revalidation itself: the lead only shares it.
      return shared === null ? null : { bytes: shared.bytes, decision: 'share' };
    }
    const shared = this.renewed(run, stored, response);
    if (shared === null) {
      void this.cache().delete(key).catch(() => {});
      return null;
    }
    const ttl = typeof shared.decision === 'object' ? shared.decision.ttl : 1;
    // Renewed with the tags of the request and of the 304's own Dogpile-Tags.
    void storeComputed(this.cache(), key, shared.bytes, this.setOptions(run, ttl, response.startedAt)).catch(() => {});
    return { bytes: shared.bytes, decision: 'share' };
  }

  /**
   * Deletes the stored responses under `keys` and invalidates `tags`, forgetting the `Vary`
   * records this process is writing under those keys. Never rejects.
   */
  async invalidate(keys: readonly string[], tags: readonly string[]): Promise<void> {
    for (const key of keys) this.writingRecords.delete(key);
    const cache = this.cache();
    await Promise.all([...keys.map((key) => cache.delete(key).catch(() => false)), tags.length === 0 ? undefined : cache.invalidateTags([...tags]).catch(() => undefined)]);
  }

  /** The generation of a URL's new `VaryRecord`: that of the record this process is writing for the same names, else a new one. */
  generationFor(base: string, names: readonly string[]): string {
    const writing = this.writingRecords.get(base);
    return writing !== undefined && sameNames(writing.names, names) ? writing.gen : newGeneration();
  }

  /** A stored response's bytes, created now on the cache's clock. */
  private encode(fields: StoredFields): Buffer {
    return encodeResponse({ createdAt: this.cache().now(), ...fields });
  }

  /** The stored response renewed by a 304 (RFC 9111 §4.3.4), with the verdict that stores it, or null when the 304 does not renew it. */
  private renewed(run: LeaderRun, stored: ServableResponse, response: CapturedResponse): SharedResponse | null {
    const renewed = renewedVerdict(run, stored, response.headers, this.rules(), Date.now());
    return renewed === undefined ? null : { bytes: this.encode(renewed.fields), decision: renewed.decision };
  }

  /** `cache.set` options, at the moment of the write, for a response written outside the miss protocol (see `storeOptions`). */
  private setOptions(run: LeaderRun, ttl: number, startedAt: number): StoreOptions {
    return storeOptions(ttl, entryTags(run), startedAt);
  }

  /**
   * Stores a variant and the URL's record. Without a known generation (`gen`), it takes that of
   * the record this process is writing for the same names, else a new one; meanwhile it reads
   * the URL's record, and when another request has written one for the same names since this
   * one found none, the variant is stored under that record's generation too and the record is
   * kept: two requests for two variants that both found no record do not orphan each other's.
   */
  private async storeVariant(run: LeaderRun, names: readonly string[], gen: string | undefined, bytes: Buffer, ttl: number, startedAt: number): Promise<void> {
    const { base, headers } = run.plan;
    const cache = this.cache();
    const { maxTtl } = this.rules();
    const writing = this.writingRecords.get(base);
    const known = gen !== undefined || (writing !== undefined && sameNames(writing.names, names));
    const record: VaryRecord = gen !== undefined ? { names, gen } : known ? writing! : { names, gen: newGeneration() };
    this.writingRecords.set(base, record);
    let writingNow = record;
    try {
      const [, current] = await Promise.all([
        storeComputed(cache, variantKey(base, record, headers), bytes, this.setOptions(run, ttl, startedAt)),
        known ? undefined : cache.get(base).then(toVaryRecord, () => undefined),
      ]);
      if (current !== undefined && current.gen !== record.gen && sameNames(current.names, names)) {
        if (this.writingRecords.get(base) === record) this.writingRecords.set(base, (writingNow = current));
        await storeComputed(cache, variantKey(base, current, headers), bytes, this.setOptions(run, ttl, startedAt));
        await cache.set(base, encodeVaryRecord(current), maxTtl);
      } else {
        await cache.set(base, encodeVaryRecord(record), maxTtl);
      }
    } catch {
      // Reported by the cache's backendError event; the next request runs the handler.
    } finally {
      if (this.writingRecords.get(base) === writingNow) this.writingRecords.delete(base);
    }
  }

  /** Keeps the URL's VaryRecord as long as the variants it leads to. */
  private async refreshRecord(base: string, record: VaryRecord): Promise<void> {
    try {
      await this.cache().set(base, encodeVaryRecord(record), this.rules().maxTtl);
    } catch {
      // As above.
    }
  }
}
