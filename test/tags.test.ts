/**
 * Tags: `getOrCompute(key, loader, { ttl, tags })`, `set(key, value, { ttl, tags })` and
 * `invalidateTags(tags, { stale })`, on the in-process store and on a real Redis (where two
 * caches on their own connections stand for two processes; the cross-process proofs are in
 * coherence-processes.test.ts). Also the entry format version 3 that carries the tags.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { createCache, InvalidOptionError, MAX_TAGS, type DogpileCache } from '../src/index.js';
import { EntryCodec } from '../src/store/codec.js';
import { decodeEntry, encodeEntry, EntryKind } from '../src/store/entry.js';
import { jsonSerializer } from '../src/store/serializer.js';
import { tagVerdict } from '../src/store/tags.js';
import { useRedis } from './support/use-redis.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { CREATED_AT, DELTA, jsonValue, STALE, TAGS, TTL } from './fixtures/formats/samples.js';

const server = useRedis();

function counting<T>(value: (run: number) => T, ms = 0) {
  let runs = 0;
  const loader = async () => {
    runs++;
    const run = runs;
    if (ms > 0) await sleep(ms);
    return value(run);
  };
  return { loader, runs: () => runs };
}

type Make = () => DogpileCache;

const stores: [string, Make][] = [
  ['in process', () => createCache()],
  ['on Redis', () => createCache({ redis: server.client(), prefix: freshId('tags') })],
];

describe.each(stores)('tags %s', (_name, make) => {
  it('invalidateTags makes every entry carrying a tag a miss; other entries stay', async () => {
    const cache = make();
    const user = freshId('user');
    const a = counting((run) => `a${run}`);
    const b = counting((run) => `b${run}`);
    const c = counting((run) => `c${run}`);
    expect(await cache.getOrCompute('a', a.loader, { ttl: 60_000, tags: [user, 'all'] })).toBe('a1');
    expect(await cache.getOrCompute('b', b.loader, { ttl: 60_000, tags: ['all'] })).toBe('b1');
    expect(await cache.getOrCompute('c', c.loader, 60_000)).toBe('c1');
    await cache.set('d', 'd-set', { ttl: 60_000, tags: [user] });
    // An entry with a stale window: an invalidation without `stale` makes it a miss all the same.
    const e = counting((run) => `e${run}`);
    expect(await cache.getOrCompute('e', e.loader, { ttl: 60_000, staleWhileRevalidate: 60_000, tags: [user] })).toBe('e1');

    await cache.invalidateTags([user]);
    expect(await cache.get('e')).toBeUndefined();
    expect(await cache.getOrCompute('e', e.loader, { ttl: 60_000, staleWhileRevalidate: 60_000, tags: [user] })).toBe('e2');
    expect(await cache.getOrCompute('a', a.loader, { ttl: 60_000, tags: [user, 'all'] })).toBe('a2');
    expect(await cache.getOrCompute('b', b.loader, { ttl: 60_000, tags: ['all'] })).toBe('b1');
    expect(await cache.getOrCompute('c', c.loader, 60_000)).toBe('c1');
    expect(await cache.get('d')).toBeUndefined();
    // The recomputed value is fresh again.
    expect(await cache.getOrCompute('a', a.loader, { ttl: 60_000, tags: [user, 'all'] })).toBe('a2');

    await cache.invalidateTags(['all']);
    expect(await cache.getOrCompute('b', b.loader, { ttl: 60_000, tags: ['all'] })).toBe('b2');
    expect(await cache.getOrCompute('a', a.loader, { ttl: 60_000, tags: [user, 'all'] })).toBe('a3');
    await cache.close();
  });

  it('a value set right after an invalidation is fresh; one set right before it is not', async () => {
    const cache = make();
    const tag = freshId('t');
    await cache.set('before', 1, { ttl: 60_000, tags: [tag] });
    await cache.invalidateTags([tag]);
    await cache.set('after', 2, { ttl: 60_000, tags: [tag] });
    expect(await cache.get('before')).toBeUndefined();
    expect(await cache.get('after')).toBe(2);
    await cache.close();
  });

  it('a value whose loader ran while its tag was invalidated is not served afterwards', async () => {
    const cache = make();
    const tag = freshId('t');
    // The first run is held until the invalidation resolved: it ran while its tag was invalidated.
    let runs = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow = {
      loader: async () => {
        const run = ++runs;
        if (run === 1) await held;
        return `v${run}`;
      },
    };
    const first = cache.getOrCompute('slow', slow.loader, { ttl: 60_000, tags: [tag] });
    await waitUntil('the first run to start', () => runs === 1);
    await cache.invalidateTags([tag]);
    release();
    // The caller that waited gets the run it waited for...
    expect(await first).toBe('v1');
    // ...but the next caller does not get a value computed before the invalidation.
    expect(await cache.getOrCompute('slow', slow.loader, { ttl: 60_000, tags: [tag] })).toBe('v2');
    await cache.close();
  });

  it('{ stale: true }: served stale within staleWhileRevalidate while one refresh runs; a miss without a stale window', async () => {
    const cache = make();
    const tag = freshId('t');
    const swr = counting((run) => `s${run}`, 50);
    const opts = { ttl: 60_000, tags: [tag], staleWhileRevalidate: 60_000 };
    expect(await cache.getOrCompute('swr', swr.loader, opts)).toBe('s1');
    const plain = counting((run) => `p${run}`);
    expect(await cache.getOrCompute('plain', plain.loader, { ttl: 60_000, tags: [tag] })).toBe('p1');

    await cache.invalidateTags([tag], { stale: true });
    const answers = await Promise.all(Array.from({ length: 20 }, () => cache.resolve('swr', swr.loader, opts)));
    expect(answers.every((r) => r.status === 'stale' && r.value === 's1')).toBe(true);
    await expect.poll(() => cache.getOrCompute('swr', swr.loader, opts), { timeout: 5_000 }).toBe('s2');
    expect(swr.runs()).toBe(2);

    expect(await cache.getOrCompute('plain', plain.loader, { ttl: 60_000, tags: [tag] })).toBe('p2');
    await cache.close();
  });

  it('a result may add its own tags (cacheable), merged with the call\'s', async () => {
    const cache = make();
    const mine = freshId('mine');
    const call = freshId('call');
    const r = counting((run) => ({ run }));
    const opts = { ttl: 60_000, tags: [call], cacheable: () => ({ decision: 'store' as const, ttl: 60_000, tags: [mine] }) };
    expect(await cache.getOrCompute('own', r.loader, opts)).toEqual({ run: 1 });
    await cache.invalidateTags([mine]);
    expect(await cache.getOrCompute('own', r.loader, opts)).toEqual({ run: 2 });
    await cache.invalidateTags([call]);
    expect(await cache.getOrCompute('own', r.loader, opts)).toEqual({ run: 3 });
    await cache.close();
  });

  it('bad tags are refused with an InvalidOptionError naming them, and nothing is written or run', async () => {
    const cache = make();
    const r = counting(() => 1);
    const bad: unknown[] = [[''], [1], ['ok', null], 'not-an-array', Array.from({ length: MAX_TAGS + 1 }, (_, i) => `t${i}`), ['x'.repeat(1025)]];
    for (const tags of bad) {
      const call = cache.getOrCompute('k', r.loader, { ttl: 1000, tags: tags as string[] });
      await expect(call).rejects.toBeInstanceOf(InvalidOptionError);
      await expect(call).rejects.toMatchObject({ option: 'tags' });
      await expect(cache.set('k', 1, { ttl: 1000, tags: tags as string[] })).rejects.toMatchObject({ option: 'tags' });
      await expect(cache.invalidateTags(tags as string[])).rejects.toMatchObject({ option: 'tags' });
    }
    await expect(cache.invalidateTags(['t'], { stale: 'yes' as unknown as boolean })).rejects.toMatchObject({ option: 'stale' });
    const badResult = cache.getOrCompute('k2', r.loader, { ttl: 1000, cacheable: () => ({ decision: 'store', ttl: 1000, tags: [''] }) });
    await expect(badResult).rejects.toMatchObject({ option: 'cacheable: tags' });
    // A tagged entry may not outlive its tags' invalidations.
    await expect(cache.getOrCompute('k', r.loader, { ttl: '8d', tags: ['t'] })).rejects.toMatchObject({ option: 'ttl', message: expect.stringContaining('tagStampTtl') });
    await expect(cache.set('k', 1, { ttl: '8d', tags: ['t'] })).rejects.toMatchObject({ option: 'ttl' });
    expect(r.runs()).toBe(1);
    expect(await cache.get('k')).toBeUndefined();
    expect(await cache.get('k2')).toBeUndefined();
    await cache.close();
  });
});

describe('invalidateTags and the wall clock', () => {
  it('resolves when the wall clock stands still or steps back (its wait for the next millisecond is bounded on the monotonic clock)', async () => {
    const cache = createCache();
    const frozen = Date.now();
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => frozen);
    try {
      const done = cache.invalidateTags(['frozen']).then(() => 'resolved');
      const bound = new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2_000).unref());
      expect(await Promise.race([done, bound])).toBe('resolved');
    } finally {
      spy.mockRestore();
      await cache.close();
    }
  });
});

describe('tags on Redis', () => {
  it('an invalidation costs one small write per tag, whatever the number of tagged entries', async () => {
    const redis = server.client();
    const prefix = freshId('cost');
    const cache = createCache({ redis, prefix });
    const tag = freshId('many');
    await Promise.all(Array.from({ length: 500 }, (_, i) => cache.set(`k${i}`, i, { ttl: 60_000, tags: [tag] })));
    const before = await redis.dbsize();
    await redis.call('CONFIG', 'RESETSTAT');
    await cache.invalidateTags([tag]);
    const stats = String(await redis.call('INFO', 'commandstats'));
    const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    expect(calls('evalsha') + calls('eval')).toBe(1);
    expect(calls('set')).toBe(1);
    expect(calls('scan') + calls('keys') + calls('del') + calls('unlink')).toBe(0);
    expect(await redis.dbsize()).toBe(before + 1);
    // The stamp is kept for tagStampTtl (7 days by default).
    const pttl = await redis.pttl(`${prefix}:t:{${tag}}`);
    expect(pttl).toBeGreaterThan(7 * 24 * 3600 * 1000 - 60_000);
    expect(await cache.get('k0')).toBeUndefined();
    expect(await cache.get('k499')).toBeUndefined();
    await cache.close();
  });

  it("a tagged value this process saw fresh is read with one GET per call, judged by its tags' stamps on that read", async () => {
    const admin = server.client();
    const prefix = freshId('plain');
    const cache = createCache({ redis: server.client(), prefix });
    const tag = freshId('t');
    const options = { ttl: 60_000, tags: [tag] };
    expect(await cache.getOrCompute('k', () => 'v1', options)).toBe('v1');
    expect(await cache.getOrCompute('k', () => 'v2', options)).toBe('v1');
    const calls = async () => {
      const stats = String(await admin.call('INFO', 'commandstats'));
      const of = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
      return { get: of('get'), scripts: of('evalsha') + of('eval') };
    };
    const before = await calls();
    for (let i = 0; i < 5; i++) expect(await cache.getOrCompute('k', () => 'v2', options)).toBe('v1');
    const after = await calls();
    expect(after.scripts - before.scripts).toBe(0);
    expect(after.get - before.get).toBe(5);
    // Invalidated by another cache (another process's): the next calls compute it again.
    const other = createCache({ redis: server.client(), prefix });
    await other.invalidateTags([tag]);
    await expect.poll(() => cache.getOrCompute('k', () => 'v3', options), { timeout: 2_000 }).toBe('v3');
    await other.close();
    await cache.close();
  });

  it('another cache on its own connection sees the invalidation (its stamps follow the tag channel)', async () => {
    const prefix = freshId('two');
    const a = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    const b = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    const tag = freshId('t');
    await a.set('k', 'old', { ttl: 60_000, tags: [tag] });
    // b reads it until it is answered from its L1.
    await expect.poll(async () => {
      let layer = '';
      const onHit = (e: { layer: string }) => (layer = e.layer);
      b.on('hit', onHit);
      await b.getOrCompute('k', () => 'computed', { ttl: 60_000, tags: [tag] });
      b.off('hit', onHit);
      return layer;
    }, { timeout: 5_000 }).toBe('l1');
    await a.invalidateTags([tag]);
    await expect.poll(() => b.getOrCompute('k', () => 'new', { ttl: 60_000, tags: [tag] }), { timeout: 2_000 }).toBe('new');
    await a.close();
    await b.close();
  });

  it('invalidateTags rejects with a BackendError when Redis is unreachable', async () => {
    const cache = createCache({ redis: 'redis://127.0.0.1:1', commandTimeout: 200, backendCooldown: 10 });
    await expect(cache.invalidateTags(['t'])).rejects.toMatchObject({ name: 'BackendError' });
    await cache.close();
  });

  it('invalidateTags rejects with a BackendError when Redis refuses the write, and changes nothing', async () => {
    const admin = server.client();
    const prefix = freshId('refused');
    const cache = createCache({ redis: server.client(), prefix, backendCooldown: 0 });
    const tag = freshId('t');
    expect(await cache.getOrCompute('k', () => 'v1', { ttl: 60_000, tags: [tag] })).toBe('v1');
    // A hit: this process now holds the tag's stamp, which a failed invalidation must not move.
    expect(await cache.resolve('k', () => 'v2', { ttl: 60_000, tags: [tag] })).toMatchObject({ value: 'v1', status: 'hit' });
    const keysBefore = (await admin.keys(`${prefix}:*`)).sort();
    await admin.config('SET', 'min-replicas-to-write', '1');
    try {
      await expect(cache.invalidateTags([tag])).rejects.toMatchObject({ name: 'BackendError' });
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
    }
    // No stamp was written, no key changed, and the tagged entry is still served, here and
    // by another cache that reads it from Redis.
    expect((await admin.keys(`${prefix}:*`)).sort()).toEqual(keysBefore);
    expect(await admin.exists(`${prefix}:t:{${tag}}`)).toBe(0);
    expect(await cache.resolve('k', () => 'v2', { ttl: 60_000, tags: [tag] })).toMatchObject({ value: 'v1', status: 'hit' });
    const other = createCache({ redis: server.client(), prefix });
    expect(await other.resolve('k', () => 'v2', { ttl: 60_000, tags: [tag] })).toMatchObject({ value: 'v1', status: 'hit' });
    await other.close();
    await cache.close();
  });
});

describe('stored entry format v3', () => {
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'formats');

  it('decodes the pinned sample (tags, own stale windows), and today writes the same bytes', () => {
    const bytes = readFileSync(path.join(dir, 'entry-json-value.v3.bin'));
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 3, 1]);
    const entry = decodeEntry(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA, revalidate: 30_000, staleIfError: STALE, tags: TAGS });
    expect(jsonSerializer.deserialize(entry.payload)).toEqual(jsonValue());
    const window = { stale: STALE, delta: DELTA, revalidate: 30_000, staleIfError: STALE, tags: TAGS };
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, jsonSerializer.serialize(jsonValue()), window).equals(bytes)).toBe(true);
    const decoded = new EntryCodec(jsonSerializer).decode(bytes);
    expect(decoded).toMatchObject({ value: jsonValue(), tags: TAGS, revalidate: 30_000, staleIfError: STALE });
  });

  it('is written only for tags or own windows; a truncated tag list is corrupt', () => {
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, Buffer.from('x'), { stale: 1 })[2]).toBe(2);
    const v3 = encodeEntry(EntryKind.Value, CREATED_AT, TTL, Buffer.from('x'), { tags: ['a-long-tag'] });
    expect(v3[2]).toBe(3);
    expect(() => decodeEntry(v3.subarray(0, 60))).toThrow(/bad entry tags/);
  });

  it('a tag stamp at or after the loader started invalidates; before it does not', () => {
    const entry = { kind: EntryKind.Value, value: 1, createdAt: 1_000, ttl: 100, delta: 50, stale: 10, tags: ['t'] };
    expect(tagVerdict(entry, () => ({ hard: 949, stale: 0 }))).toBe('ok');
    expect(tagVerdict(entry, () => ({ hard: 950, stale: 0 }))).toBe('gone');
    expect(tagVerdict(entry, () => ({ hard: 0, stale: 990 }))).toBe(990);
    expect(tagVerdict({ ...entry, stale: 0 }, () => ({ hard: 0, stale: 990 }))).toBe('gone');
  });
});

describe('peek: a synchronous read of process memory', () => {
  it('in process: the fresh value or undefined, never a loader; tags and deletes apply', async () => {
    const cache = createCache();
    const tag = freshId('t');
    expect(cache.peek('p')).toBeUndefined();
    await cache.getOrCompute('p', () => 'v', { ttl: 60_000, tags: [tag] });
    expect(cache.peek('p')).toBe('v');
    await cache.invalidateTags([tag]);
    expect(cache.peek('p')).toBeUndefined();
    await cache.set('q', 'w', 40);
    expect(cache.peek('q')).toBe('w');
    await sleep(60);
    expect(cache.peek('q')).toBeUndefined();
    expect(() => cache.peek('')).toThrow(InvalidOptionError);
    await cache.close();
    expect(cache.peek('p')).toBeUndefined();
  });

  it('on Redis with an L1: the L1 copy once the key is followed; another process\'s delete drops it', async () => {
    const prefix = freshId('peek');
    const a = createCache({ redis: server.client(), prefix, l1: { ttl: 60_000 } });
    const b = createCache({ redis: server.client(), prefix });
    await b.set('k', 'v1', 60_000);
    expect(a.peek('k')).toBeUndefined();
    await expect.poll(async () => {
      await a.getOrCompute('k', () => 'computed', 60_000);
      return a.peek('k');
    }, { timeout: 5_000 }).toBe('v1');
    await b.delete('k');
    await expect.poll(() => a.peek('k'), { timeout: 2_000 }).toBeUndefined();
    // Without an L1 nothing is in process memory.
    expect(b.peek('k')).toBeUndefined();
    await a.close();
    await b.close();
  });
});
