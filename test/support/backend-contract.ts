/**
 * The contract every `Backend` keeps, as one suite that each backend runs
 * (`test/backend-contract.test.ts`). Promises that only a distributed backend makes (waiting
 * on another process's lead, announcements, lock expiry) run where `backend.distributed` is
 * true; a local backend promises instead that every miss leads and nothing is announced.
 * Faults that need access to the store itself (foreign bytes, a wrong Redis type, a lock
 * without expiry) run where the harness provides `raw`. The backend encodes entries itself
 * (its `EntryCodec`), so the suite hands it entries only, never bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEntry, EntryKind } from '../../src/store/entry.js';
import type { Backend, Commit, EntryStore, Lookup, MissCoordinator, Outcome, StoredEntry } from '../../src/store/types.js';
import { freshId, sleep, waitUntil } from '../../tools/basics.js';

export interface BackendHarness {
  /** The backend under test, its codec on the v8 serializer. */
  backend: EntryStore & MissCoordinator;
  /** Values whose encoding is larger than this are announced without the bytes. */
  inlineMax?: number;
  /** Direct access to the store, for faults no cache call produces. */
  raw?: {
    /** Writes `bytes` where the backend keeps `key`'s value. */
    writeValue(key: string, bytes: Buffer): Promise<void>;
    /** Puts a value of another type (not a string) where the backend keeps `key`'s value. */
    writeWrongType(key: string): Promise<void>;
    /** Writes `key`'s lead lock held by `token` with no expiry. */
    writeLockWithoutExpiry(key: string, token: string): Promise<void>;
    /** Remaining ms of `key`'s lead lock (-2: none, -1: no expiry). */
    lockTtl(key: string): Promise<number>;
  };
  close(): Promise<void>;
}

const LOCK_TTL = 5_000;

function entry(value: unknown, ttl = 60_000, kind: EntryKind = EntryKind.Value): StoredEntry {
  return { kind, value, createdAt: Date.now(), ttl };
}

/** What a backend promises beyond the common part (decides which tests run). */
export interface BackendTraits {
  /** Coordinates callers across processes: waiting on another's lead, announcements, lock expiry. */
  distributed: boolean;
  /** Its harness provides `raw` store access for the fault tests. */
  storeAccess: boolean;
  /** Which layer `peek` reads: the store itself, or an L1 in front of a shared store. */
  peekLayer: EntryStore['peekLayer'];
  /** With `peekLayer: 'l1'`: the ttl (ms) of the backend's L1, or undefined when it has none. */
  l1Ttl?: number;
}

/** Both role contracts, on one backend. */
export function backendContract(name: string, traits: BackendTraits, setup: () => Promise<BackendHarness>): void {
  entryStoreContract(name, traits, setup);
  missCoordinatorContract(name, traits, setup);
}

/** The entry store role (`EntryStore`): get, set, delete, peek and keep, encoding. The suite sees the backend as that role only. */
export function entryStoreContract(name: string, traits: BackendTraits, setup: () => Promise<BackendHarness>): void {
  describe(`Entry store contract: ${name}`, () => {
    let h: BackendHarness;
    let backend: EntryStore;
    beforeAll(async () => {
      h = await setup();
      backend = h.backend;
    });
    afterAll(async () => {
      await h?.close();
    });

    const expectEntry = (found: unknown, expected: StoredEntry) => {
      expect(found).toMatchObject({ kind: expected.kind, createdAt: expected.createdAt, ttl: expected.ttl });
      expect((found as StoredEntry).value).toEqual(expected.value);
    };

    describe('get / set / delete', () => {
      it('an unknown key is undefined', async () => {
        expect(await backend.get(freshId('k'))).toBeUndefined();
      });

      it('set then get returns the entry: kind, value, createdAt, ttl', async () => {
        const key = freshId('k');
        const e = entry({ a: [1, 'two'], n: null });
        await backend.set(key, e);
        expectEntry(await backend.get(key), e);
      });

      it('a value expires after its ttl', async () => {
        const key = freshId('k');
        const e = entry('short', 30);
        await backend.set(key, e);
        await waitUntil('the value to expire', async () => (await backend.get(key)) === undefined, 5_000);
      });

      it('delete says whether something was deleted', async () => {
        const key = freshId('k');
        const e = entry(1);
        await backend.set(key, e);
        expect(await backend.delete(key)).toBe(true);
        expect(await backend.get(key)).toBeUndefined();
        expect(await backend.delete(key)).toBe(false);
      });

      it('getMany answers every key in its order: entries, undefined for unknown keys, repeated keys alike, nothing for no keys', async () => {
        const a = freshId('k');
        const b = `${a}:b`;
        const ea = entry('a');
        const eb = entry({ nested: [1, 2] });
        await backend.set(a, ea);
        await backend.set(b, eb);
        const found = await backend.getMany([b, `${a}:none`, a, b]);
        expect(found).toHaveLength(4);
        expectEntry(found[0], eb);
        expect(found[1]).toBeUndefined();
        expectEntry(found[2], ea);
        expectEntry(found[3], eb);
        expect(await backend.getMany([])).toEqual([]);
      });

      it('keys are independent', async () => {
        const a = freshId('k');
        const b = `${a}:other`;
        const e = entry('a');
        await backend.set(a, e);
        expect(await backend.get(b)).toBeUndefined();
        expectEntry(await backend.get(a), e);
      });
    });

    describe('peek and keep', () => {
      const withL1 = it.runIf(traits.peekLayer === 'l1' && traits.l1Ttl !== undefined);
      const withoutL1 = it.runIf(traits.peekLayer === 'l1' && traits.l1Ttl === undefined);

      /**
       * Keeps what a read of `key` returns, read again until the key's channel is followed: only
       * then is a copy served as a hit (every later write or delete of the key is heard of).
       */
      async function keepRead(key: string, left = 60_000): Promise<StoredEntry> {
        return waitUntil('a copy kept after the key is followed', async () => {
          const found = await backend.get(key);
          if (found === undefined || 'corrupt' in found) throw new Error(`nothing readable under ${key}`);
          backend.keep(key, found, left);
          return backend.peek(key);
        }, 5_000);
      }

      it('says which layer peek reads, and whether process memory holds entries at all', () => {
        expect(backend.peekLayer).toBe(traits.peekLayer);
        // Callers skip peek, peekStale and keep when it says no: it must say yes wherever they find something.
        expect(backend.holdsInMemory).toBe(traits.peekLayer === 'store' || traits.l1Ttl !== undefined);
      });

      it('peek of an unknown key is undefined, synchronously', () => {
        expect(backend.peek(freshId('k'))).toBeUndefined();
      });

      withL1('a kept value lasts the L1 ttl, or less when the entry has less left', async () => {
        const l1Ttl = traits.l1Ttl!;
        const long = freshId('k');
        const short = freshId('k');
        await backend.set(long, entry('long'));
        await backend.set(short, entry('short'));
        // Both keys followed and kept first; then kept again in one tick: the long one for
        // longer than the L1 ttl, the short one for 30 ms.
        const l = await keepRead(long);
        const s = await keepRead(short);
        backend.keep(long, l, 60_000);
        backend.keep(short, s, 30);
        const kept = performance.now();
        // By order: the short copy goes first, and the long one is still there when it does
        // (both read in the same tick). Only a loop stalled for the L1 ttl less 30 ms between
        // two polls could see both gone at once.
        const whenShortWent = await waitUntil('the short-lived kept value to go', () => backend.peek(short) === undefined && { long: backend.peek(long) }, 5_000);
        expect(whenShortWent.long).toBeDefined();
        await waitUntil('the kept value to go after the L1 ttl', () => backend.peek(long) === undefined, l1Ttl + 5_000);
        expect(performance.now() - kept).toBeGreaterThanOrEqual(l1Ttl - 5);
      });

      withL1('delete drops the kept copy too', async () => {
        const key = freshId('k');
        const e = entry('both');
        await backend.set(key, e);
        expectEntry(await keepRead(key), e);
        expect(await backend.delete(key)).toBe(true);
        expect(backend.peek(key)).toBeUndefined();
        expect(await backend.get(key)).toBeUndefined();
      });

      withoutL1('without an L1, keep is a no-op and peek finds nothing, not even a stored value', async () => {
        const key = freshId('k');
        const e = entry('stored');
        await backend.set(key, e);
        backend.keep(key, e, 60_000);
        expect(backend.peek(key)).toBeUndefined();
        expectEntry(await backend.get(key), e);
      });
    });

    describe('encoding (the backend encodes entries itself)', () => {
      const unencodable = () => entry({ fn: () => 1 });

      it('set rejects a value that cannot be encoded with SerializationError naming the key, and stores nothing', async () => {
        const key = freshId('k');
        await expect(backend.set(key, unencodable())).rejects.toMatchObject({ name: 'SerializationError', code: 'E_SERIALIZATION', key });
        expect(await backend.get(key)).toBeUndefined();
        expect(backend.peek(key)).toBeUndefined();
      });
    });
  });
}

/**
 * The miss coordinator role (`MissCoordinator`): lookup-or-lead, commit, renew, listen, what
 * they leave in process memory, and the store's faults met by a lookup; what a commit stored is
 * read back through the entry store.
 */
export function missCoordinatorContract(name: string, traits: BackendTraits, setup: () => Promise<BackendHarness>): void {
  describe(`Miss coordinator contract: ${name}`, () => {
    let h: BackendHarness;
    let backend: EntryStore & MissCoordinator;
    beforeAll(async () => {
      h = await setup();
      backend = h.backend;
    });
    afterAll(async () => {
      await h?.close();
    });

    const store = (e: StoredEntry): Commit => ({ mode: 'store', entry: e, sharedTtl: 1_000 });
    const share = (e: StoredEntry, sharedTtl = 1_000): Commit => ({ mode: 'share', entry: e, sharedTtl });
    const lead = async (key: string, token = freshId('t')) => {
      expect(await backend.lookup({ key, token, lockTtl: LOCK_TTL })).toEqual({ kind: 'lead' });
      return token;
    };
    const expectEntry = (found: unknown, expected: StoredEntry) => {
      expect(found).toMatchObject({ kind: expected.kind, createdAt: expected.createdAt, ttl: expected.ttl });
      expect((found as StoredEntry).value).toEqual(expected.value);
    };

    it('is available while open, and says whether it is distributed', () => {
      expect(backend.available()).toBe(true);
      expect(backend.distributed).toBe(traits.distributed);
    });

    describe('lookup and commit', () => {
      it('a miss leads; a stored value is a hit', async () => {
        const key = freshId('k');
        const token = await lead(key);
        const e = entry({ v: 1 });
        expect(await backend.commit(key, token, store(e))).toBe(true);
        const found = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(found.kind).toBe('hit');
        expectEntry((found as Extract<Lookup, { kind: 'hit' }>).entry, e);
        expectEntry(await backend.get(key), e);
      });

      it('skipValue looks past a stored value', async () => {
        const key = freshId('k');
        const e = entry('old');
        await backend.set(key, e);
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL, skip: 'any' })).kind).toBe('lead');
      });

      it('commit "store" replaces the value', async () => {
        const key = freshId('k');
        const old = entry('old');
        await backend.set(key, old);
        const token = freshId('t');
        expect(await backend.lookup({ key, token, lockTtl: LOCK_TTL, skip: 'any' })).toEqual({ kind: 'lead' });
        const e = entry('new');
        expect(await backend.commit(key, token, store(e))).toBe(true);
        expectEntry(await backend.get(key), e);
      });

      it('commit "uncacheable" stores a hit-for-miss marker when given one, nothing otherwise', async () => {
        const withMarker = freshId('k');
        const marker = entry(undefined, 60_000, EntryKind.HitForMiss);
        const t1 = await lead(withMarker);
        expect(await backend.commit(withMarker, t1, { mode: 'uncacheable', marker })).toBe(true);
        expect(await backend.get(withMarker)).toMatchObject({ kind: EntryKind.HitForMiss, createdAt: marker.createdAt, ttl: marker.ttl });

        const without = freshId('k');
        const t2 = await lead(without);
        expect(await backend.commit(without, t2, { mode: 'uncacheable', marker: undefined })).toBe(true);
        expect(await backend.get(without)).toBeUndefined();
      });

      it.each(['share', 'error', 'release'] as const)('commit "%s" stores nothing', async (mode) => {
        const key = freshId('k');
        const token = await lead(key);
        const e = entry('not stored');
        const commit: Commit =
          mode === 'share' ? share(e)
          : mode === 'error' ? { mode, name: 'Error', message: 'boom' }
          : { mode };
        expect(await backend.commit(key, token, commit)).toBe(true);
        expect(await backend.get(key)).toBeUndefined();
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('lead');
      });

      it('renew while leading is true', async () => {
        const key = freshId('k');
        const token = await lead(key);
        expect(await backend.renew(key, token, LOCK_TTL)).toBe(true);
        expect(await backend.commit(key, token, { mode: 'release' })).toBe(true);
      });
      /** A value made `age` ms ago, fresh for `ttl`, kept `stale` ms more. */
      const aged = (value: unknown, age: number, ttl: number, stale: number): StoredEntry => ({
        kind: EntryKind.Value,
        value,
        createdAt: Date.now() - age,
        ttl,
        stale,
        delta: 0,
      });

      it('a value past its ttl inside its stale window is stale: the first lookup takes the lead, the next ones do not', async () => {
        const key = freshId('k');
        const old = aged('old', 0, 100, 60_000);
        await backend.set(key, old);
        await sleep(150);
        const t1 = freshId('t');
        const first = await backend.lookup({ key, token: t1, lockTtl: LOCK_TTL });
        expect(first).toMatchObject({ kind: 'stale', lead: true, hold: false });
        expectEntry((first as Extract<Lookup, { kind: 'stale' }>).entry, old);
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).toMatchObject({ kind: 'stale', lead: false, hold: false });
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL, tryLead: false })).toMatchObject({ kind: 'stale', lead: false });
        const fresh = aged('new', 0, 60_000, 60_000);
        expect(await backend.commit(key, t1, store(fresh))).toBe(true);
        const after = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(after.kind).toBe('hit');
        expectEntry((after as Extract<Lookup, { kind: 'hit' }>).entry, fresh);
      });

      it('a stale value is not led when asked not to (tryLead false), and the lock stays free', async () => {
        const key = freshId('k');
        await backend.set(key, aged('old', 0, 100, 60_000));
        await sleep(150);
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL, tryLead: false })).toMatchObject({ kind: 'stale', lead: false, hold: false });
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).toMatchObject({ kind: 'stale', lead: true });
      });

      it('commit "fail" keeps the lock as a hold for holdMs: lookups of the stale value say hold, and lead again after it', async () => {
        const key = freshId('k');
        await backend.set(key, aged('old', 0, 100, 60_000));
        await sleep(150);
        const token = freshId('t');
        expect(await backend.lookup({ key, token, lockTtl: LOCK_TTL })).toMatchObject({ kind: 'stale', lead: true });
        expect(await backend.commit(key, token, { mode: 'fail', name: 'Error', message: 'boom', holdMs: 300 })).toBe(true);
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).toMatchObject({ kind: 'stale', lead: false, hold: true });
        await sleep(350);
        expect(await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).toMatchObject({ kind: 'stale', lead: true });
      });

      it('tryLead takes a free lead lock once', async () => {
        const key = freshId('k');
        const token = freshId('t');
        expect(await backend.tryLead(key, token, LOCK_TTL)).toBe(true);
        expect(await backend.tryLead(key, freshId('t'), LOCK_TTL)).toBe(false);
        expect(await backend.commit(key, token, { mode: 'release' })).toBe(true);
        expect(await backend.tryLead(key, freshId('t'), LOCK_TTL)).toBe(true);
      });
    });

    describe('a local backend', () => {
      it.runIf(!traits.distributed)('every miss leads, also while another caller leads; listening hears nothing', async () => {
        expect(backend.distributed).toBe(false);
        const key = freshId('k');
        const heard: (Outcome | null)[] = [];
        const stop = await backend.listen(key, (o) => heard.push(o));
        await lead(key, 'a');
        await lead(key, 'b');
        expect(await backend.commit(key, 'b', store(entry('b')))).toBe(true);
        await sleep(20);
        expect(heard).toEqual([]);
        stop();
        expect(await backend.getShared(key)).toBeUndefined();
      });
    });

    describe('a distributed backend', () => {
      const onlyDistributed = it.runIf(traits.distributed);

      onlyDistributed('a second caller waits while another leads, for at most the lock ttl', async () => {
        expect(backend.distributed).toBe(true);
        const key = freshId('k');
        await lead(key);
        const waiting = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(waiting.kind).toBe('wait');
        const { remaining, repaired } = waiting as Extract<Lookup, { kind: 'wait' }>;
        expect(remaining).toBeGreaterThan(0);
        expect(remaining).toBeLessThanOrEqual(LOCK_TTL);
        expect(repaired).toBeUndefined();
      });

      onlyDistributed('commit releases the lead', async () => {
        const key = freshId('k');
        const token = await lead(key);
        expect(await backend.commit(key, token, { mode: 'release' })).toBe(true);
        await lead(key);
      });

      onlyDistributed('a caller that lost the lead cannot commit or renew, and writes nothing', async () => {
        const key = freshId('k');
        await lead(key, 'holder');
        expect(await backend.commit(key, 'someone-else', store(entry('stale')))).toBe(false);
        expect(await backend.renew(key, 'someone-else', LOCK_TTL)).toBe(false);
        expect(await backend.get(key)).toBeUndefined();
        expect(await backend.commit(key, 'holder', { mode: 'release' })).toBe(true);
        expect(await backend.renew(key, 'holder', LOCK_TTL)).toBe(false);
        expect(await backend.commit(key, 'holder', store(entry('late')))).toBe(false);
      });

      onlyDistributed('a lead runs out after its lock ttl; renew keeps it', async () => {
        const key = freshId('k');
        expect(await backend.lookup({ key, token: 'short', lockTtl: 200 })).toEqual({ kind: 'lead' });
        await waitUntil('the lead to run out', async () => (await backend.lookup({ key, token: 'next', lockTtl: LOCK_TTL })).kind === 'lead', 5_000);

        const kept = freshId('k');
        expect(await backend.lookup({ key: kept, token: 'renewer', lockTtl: 300 })).toEqual({ kind: 'lead' });
        for (let i = 0; i < 4; i++) {
          await sleep(100);
          expect(await backend.renew(kept, 'renewer', 300)).toBe(true);
        }
        expect((await backend.lookup({ key: kept, token: 'other', lockTtl: LOCK_TTL })).kind).toBe('wait');
      });

      describe('listen and announce', () => {
        const announced = async (key: string, commit: (token: string) => Commit): Promise<Outcome> => {
          const heard: (Outcome | null)[] = [];
          const stop = await backend.listen(key, (o) => heard.push(o));
          try {
            const token = await lead(key);
            expect(await backend.commit(key, token, commit(token))).toBe(true);
            return await waitUntil('an announcement', () => heard.find((o) => o !== null) ?? undefined, 5_000);
          } finally {
            stop();
          }
        };
        const small = () => entry({ small: true });
        const big = () => entry('x'.repeat((h.inlineMax ?? 1024) + 100));

        onlyDistributed('store: a small value travels with the announcement', async () => {
          const e = small();
          const o = await announced(freshId('k'), () => store(e));
          expect(o).toMatchObject({ kind: 'value', stored: true });
          expectEntry((o as Extract<Outcome, { kind: 'value' }>).entry, e);
        });

        onlyDistributed('store: a big value is announced as stored, to be read', async () => {
          const key = freshId('k');
          const e = big();
          expect(await announced(key, () => store(e))).toEqual({ kind: 'stored', createdAt: e.createdAt });
          expectEntry(await backend.get(key), e);
        });

        onlyDistributed('share: a small value travels with the announcement and is not stored', async () => {
          const key = freshId('k');
          const e = small();
          const o = await announced(key, () => share(e));
          expect(o).toMatchObject({ kind: 'value', stored: false });
          expectEntry((o as Extract<Outcome, { kind: 'value' }>).entry, e);
          expect(await backend.get(key)).toBeUndefined();
        });

        onlyDistributed('share: a big value is left aside for the waiters (getShared) for its shared ttl', async () => {
          const key = freshId('k');
          const e = big();
          const o = await announced(key, () => share(e, 300));
          expect(o).toEqual({ kind: 'shared' });
          expect(await backend.get(key)).toBeUndefined();
          expectEntry(await backend.getShared(key), e);
          await waitUntil('the shared value to expire', async () => (await backend.getShared(key)) === undefined, 5_000);
        });

        onlyDistributed('uncacheable, error and release are announced', async () => {
          expect(await announced(freshId('k'), () => ({ mode: 'uncacheable', marker: undefined }))).toEqual({ kind: 'uncacheable' });
          expect(await announced(freshId('k'), () => ({ mode: 'error', name: 'TypeError', message: 'boom' }))).toEqual({
            kind: 'error',
            name: 'TypeError',
            message: 'boom',
          });
          expect(await announced(freshId('k'), () => ({ mode: 'release' }))).toEqual({ kind: 'released' });
        });

        onlyDistributed('a listener stops hearing once unsubscribed; other keys are not heard', async () => {
          const key = freshId('k');
          const heard: (Outcome | null)[] = [];
          const stop = await backend.listen(key, (o) => heard.push(o));
          const other = freshId('k');
          const t0 = await lead(other);
          await backend.commit(other, t0, { mode: 'release' });
          stop();
          const t1 = await lead(key);
          await backend.commit(key, t1, { mode: 'release' });
          await sleep(50);
          expect(heard.filter((o) => o !== null)).toEqual([]);
        });
      });
    });

    describe('peek and keep (through the protocol)', () => {
      const inStore = it.runIf(traits.peekLayer === 'store');
      const withL1 = it.runIf(traits.peekLayer === 'l1' && traits.l1Ttl !== undefined);

      /**
       * Keeps what a read of `key` returns, read again until the key's channel is followed: only
       * then is a copy served as a hit (every later write or delete of the key is heard of).
       */
      async function keepRead(key: string, left = 60_000): Promise<StoredEntry> {
        return waitUntil('a copy kept after the key is followed', async () => {
          const found = await backend.get(key);
          if (found === undefined || 'corrupt' in found) throw new Error(`nothing readable under ${key}`);
          backend.keep(key, found, left);
          return backend.peek(key);
        }, 5_000);
      }

      inStore('peek reads the store synchronously: what set and commit stored, nothing once deleted or expired', async () => {
        const key = freshId('k');
        const e = entry({ peeked: [1, 2] });
        await backend.set(key, e);
        expectEntry(backend.peek(key), e);
        const token = freshId('t');
        expect(await backend.lookup({ key, token, lockTtl: LOCK_TTL, skip: 'any' })).toEqual({ kind: 'lead' });
        const next = entry('next');
        expect(await backend.commit(key, token, store(next))).toBe(true);
        expectEntry(backend.peek(key), next);
        expect(await backend.delete(key)).toBe(true);
        expect(backend.peek(key)).toBeUndefined();

        const marked = freshId('k');
        const marker = entry(undefined, 60_000, EntryKind.HitForMiss);
        expect(await backend.commit(marked, await lead(marked), { mode: 'uncacheable', marker })).toBe(true);
        expect(backend.peek(marked)).toMatchObject({ kind: EntryKind.HitForMiss, createdAt: marker.createdAt, ttl: marker.ttl });

        const short = freshId('k');
        await backend.set(short, entry('short', 30));
        await waitUntil('the peeked value to expire', () => backend.peek(short) === undefined, 5_000);
      });

      inStore('keep is a no-op: it stores nothing', async () => {
        const key = freshId('k');
        backend.keep(key, entry('kept'), 60_000);
        expect(backend.peek(key)).toBeUndefined();
        expect(await backend.get(key)).toBeUndefined();
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('lead');
      });

      withL1('peek reads only what was kept, not the shared store; keep writes nothing to the store', async () => {
        const key = freshId('k');
        const e = entry({ stored: true });
        await backend.set(key, e);
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('hit');
        expectEntry(await backend.get(key), e);
        expect(backend.peek(key)).toBeUndefined();
        expectEntry(await keepRead(key), e);

        // A value that was not read after the key was followed is a fallback only, never a hit.
        const keptOnly = freshId('k');
        const k = entry('kept only');
        // A hit read just before, in the same tick: the hit check's clock reading is then
        // older than the fallback's keeping, and must still not make it a hit.
        expect(backend.peek(key)).toBeDefined();
        backend.keep(keptOnly, k, 60_000);
        expect(backend.peek(keptOnly)).toBeUndefined();
        expectEntry(backend.peekStale(keptOnly), k);
        expect(await backend.get(keptOnly)).toBeUndefined();
        expect((await backend.lookup({ key: keptOnly, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('lead');
      });
    });

    describe('encoding (the backend encodes entries itself) (through the protocol)', () => {
      const unencodable = () => entry({ fn: () => 1 });

      it.each(['store', 'share'] as const)('commit "%s" rejects such a value before anything is sent: nothing stored or announced, the lead kept', async (mode) => {
        const key = freshId('k');
        const heard: (Outcome | null)[] = [];
        const stop = await backend.listen(key, (o) => heard.push(o));
        try {
          const token = await lead(key);
          const e = unencodable();
          await expect(backend.commit(key, token, mode === 'store' ? store(e) : share(e))).rejects.toMatchObject({ name: 'SerializationError', key });
          expect(await backend.get(key)).toBeUndefined();
          expect(await backend.getShared(key)).toBeUndefined();
          if (traits.distributed) {
            expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('wait');
            expect(await backend.renew(key, token, LOCK_TTL)).toBe(true);
          }
          await sleep(20);
          expect(heard.filter((o) => o !== null)).toEqual([]);
          expect(await backend.commit(key, token, { mode: 'release' })).toBe(true);
        } finally {
          stop();
        }
      });
    });

    describe('faults in the store', () => {
      const withRaw = it.runIf(traits.storeAccess);

      withRaw('foreign bytes under a key are reported corrupt, not returned', async () => {
        const key = freshId('k');
        await h.raw!.writeValue(key, Buffer.from('written by someone else'));
        const found = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(found.kind).toBe('corrupt');
        expect((found as Extract<Lookup, { kind: 'corrupt' }>).error.name).toBe('CorruptEntryError');
        expect(await backend.get(key)).toMatchObject({ corrupt: expect.objectContaining({ name: 'CorruptEntryError' }) });
        // Looking past it, a caller can lead and replace it.
        expect((await backend.lookup({ key, token: 'fixer', lockTtl: LOCK_TTL, skip: 'any' })).kind).toBe('lead');
        const e = entry('fixed');
        expect(await backend.commit(key, 'fixer', store(e))).toBe(true);
        expectEntry(await backend.get(key), e);
      });

      withRaw('getMany reports foreign bytes as that key\'s corrupt entry; a value of another type is no entry; the other keys are answered', async () => {
        const good = freshId('k');
        const foreign = `${good}:foreign`;
        const wrong = `${good}:wrong`;
        const e = entry('good');
        await backend.set(good, e);
        await h.raw!.writeValue(foreign, Buffer.from('written by someone else'));
        await h.raw!.writeWrongType(wrong);
        const found = await backend.getMany([foreign, good, wrong]);
        expect(found[0]).toMatchObject({ corrupt: expect.objectContaining({ name: 'CorruptEntryError' }) });
        expectEntry(found[1], e);
        // MGET answers nil for a key of another type; the one-key protocol reports it when it looks up that key.
        expect(found[2]).toBeUndefined();
      });

      withRaw('a right header with a payload the serializer cannot read is corrupt', async () => {
        const key = freshId('k');
        // The header of a value entry (as the codec writes it) around bytes the v8 serializer rejects.
        await h.raw!.writeValue(key, encodeEntry(EntryKind.Value, Date.now(), 60_000, Buffer.from([0xff, 0x00, 0xff])));
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL })).kind).toBe('corrupt');
      });

      withRaw('a value of another type is corrupt, and skipValue leads past it', async () => {
        const key = freshId('k');
        await h.raw!.writeWrongType(key);
        const found = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(found.kind).toBe('corrupt');
        expect((found as Extract<Lookup, { kind: 'corrupt' }>).error.message).toMatch(/WRONGTYPE|foreign/);
        expect((await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL, skip: 'any' })).kind).toBe('lead');
      });

      withRaw('a lock without expiry is given one: the caller waits, told it was repaired', async () => {
        const key = freshId('k');
        await h.raw!.writeLockWithoutExpiry(key, 'forever');
        expect(await h.raw!.lockTtl(key)).toBe(-1);
        const found = await backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
        expect(found.kind).toBe('wait');
        const { remaining, repaired } = found as Extract<Lookup, { kind: 'wait' }>;
        expect(remaining).toBe(LOCK_TTL);
        expect(repaired?.name).toBe('CorruptEntryError');
        const left = await h.raw!.lockTtl(key);
        expect(left).toBeGreaterThan(0);
        expect(left).toBeLessThanOrEqual(LOCK_TTL);
      });
    });
  });
}

export interface InvalidationHarness {
  /** The backend under test, the last generation of its chain its own (what `clear` stamps). */
  backend: Backend;
  close(): Promise<void>;
}

/**
 * The invalidation role (`Invalidation`): tags' and generations' stamps, written by
 * `invalidateTags` and `clear`, judge every entry read through the other two roles by one rule:
 * an entry whose run began at or before a stamp is a miss, or stale since it with `stale: true`
 * (a miss without a stale window); an entry made after it is untouched.
 */
export function invalidationContract(name: string, setup: () => Promise<InvalidationHarness>): void {
  describe(`Invalidation contract: ${name}`, () => {
    let h: InvalidationHarness;
    let backend: Backend;
    beforeAll(async () => {
      h = await setup();
      backend = h.backend;
    });
    afterAll(async () => {
      await h?.close();
    });

    /** An entry made now on the store's clock (the clock stamps are written on). */
    const made = (value: unknown, more: Partial<StoredEntry> = {}): StoredEntry => ({ kind: EntryKind.Value, value, createdAt: backend.now(), ttl: 60_000, ...more });
    const lookup = (key: string) => backend.lookup({ key, token: freshId('t'), lockTtl: LOCK_TTL });
    /**
     * Apart on the store's clock from the stamp written before or after (its time and `now`, an
     * estimate of it, may differ a little): entries made before a stamp are made after the stamps
     * of the earlier tests.
     */
    const apart = () => sleep(30);

    for (const write of ['invalidateTags', 'clear'] as const) {
      /** What an entry the write concerns carries: a tag of its own, or nothing (every entry of the cache). */
      const concerned = (): Partial<StoredEntry> => (write === 'invalidateTags' ? { tags: [freshId('tag')] } : {});
      const invalidate = (more: Partial<StoredEntry>, stale: boolean) => (more.tags ? backend.invalidateTags(more.tags, stale, 60_000) : backend.clear(stale, 60_000));

      it(`${write}: an entry made before is a miss (get, lookup leads), one made after is a hit, and an entry it does not concern is untouched`, async () => {
        const more = concerned();
        await apart();
        const [before, other] = [freshId('k'), freshId('k')];
        await backend.set(before, made('old', more));
        if (write === 'invalidateTags') await backend.set(other, made('other'));
        await apart();
        await invalidate(more, false);
        await apart();
        expect(await backend.get(before)).toBeUndefined();
        expect(await lookup(before)).toEqual({ kind: 'lead' });
        if (write === 'invalidateTags') expect(await backend.get(other)).toMatchObject({ value: 'other' });
        const after = freshId('k');
        await backend.set(after, made('new', more));
        expect(await backend.get(after)).toMatchObject({ value: 'new' });
        expect((await lookup(after)).kind).toBe('hit');
      });

      it(`${write}: a run that began before it is older, even when its value was made after (createdAt less delta)`, async () => {
        const more = concerned();
        const key = freshId('k');
        await invalidate(more, false);
        await apart();
        await backend.set(key, made('computed across it', { ...more, delta: 5_000 }));
        expect(await backend.get(key)).toBeUndefined();
      });

      it(`${write} with stale: an entry with a stale window reads stale since it; one without is a miss`, async () => {
        const more = concerned();
        await apart();
        const [windowed, bare] = [freshId('k'), freshId('k')];
        await backend.set(windowed, made('windowed', { ...more, stale: 60_000 }));
        await backend.set(bare, made('bare', more));
        await apart();
        await invalidate(more, true);
        await apart();
        const found = await backend.get(windowed);
        expect(found).toMatchObject({ value: 'windowed' });
        const entry = found as StoredEntry;
        expect(entry.createdAt + entry.ttl).toBeLessThanOrEqual(backend.now());
        expect(await backend.get(bare)).toBeUndefined();
        expect(await lookup(windowed)).toMatchObject({ kind: 'stale', lead: true });
      });

      it(`${write}: withKnownStamps judges by the stamps held in this process, without a call`, async () => {
        const more = concerned();
        await apart();
        const key = freshId('k');
        const old = made('old', more);
        await backend.set(key, old);
        await apart();
        await invalidate(more, false);
        await apart();
        // A read follows the stamps it met (held from then on, once their channels are live).
        await waitUntil('the stamps to be held here', async () => (await backend.get(key)) === undefined && backend.withKnownStamps(made('new', more)) !== undefined, 5_000);
        expect(backend.withKnownStamps(old)).toBeUndefined();
      });
    }
  });
}
