/**
 * dogpile-guard/next's handlers against a real Redis, each "pod" a handler from its own factory
 * (its own cache and connections) on the one server: what Next stores reads back equal; a miss
 * is rendered by one pod while the other's `get` waits for that render's `set`; a stale entry is
 * due for regeneration in one pod only; tags (the entry's and the request's soft tags) and
 * `getExpiration` read the library's stamps; with Redis unreachable the handlers answer as an
 * empty cache. The whole `next build` / `next start` fleet is test/nextjs-fleet.test.ts.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createCacheHandler, createUseCacheHandler, type NextCacheHandler, type NextUseCacheEntry, type NextUseCacheHandler } from '../src/next/index.js';
import { InvalidOptionError } from '../src/shared/errors.js';
import { useRedis } from './support/use-redis.js';
import { freshId, sleep, waitUntil } from '../tools/basics.js';
import { RedisServer } from '../tools/redis-server.js';

const redis = useRedis();
const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

/** A pod's `cacheHandler`: a handler of a class made by its own factory (one cache, one Redis connection). */
function pod(options: Record<string, unknown> = {}): NextCacheHandler {
  const Handler = createCacheHandler({ redis: redis.url, ...options });
  closers.push(() => Handler.close());
  return new Handler({ revalidatedTags: [] });
}

function usePod(options: Record<string, unknown> = {}): NextUseCacheHandler {
  const handler = createUseCacheHandler({ redis: redis.url, ...options });
  closers.push(() => handler.close());
  return handler;
}

/** Settles once Redis answered a command sent after every command already sent on a fresh connection (a round trip later). */
async function roundTrips(n = 3): Promise<void> {
  const c = redis.client();
  for (let i = 0; i < n; i++) await c.ping();
  c.disconnect();
}

/** Whether `promise` settled by now (after a few round trips to Redis). */
async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await roundTrips();
  return settled;
}

function page(id: string) {
  return {
    kind: 'APP_PAGE',
    html: `<html><body>${id}</body></html>`,
    rscData: Buffer.from([0, 1, 2, 255, 254]),
    headers: { 'x-next-cache-tags': `_N_T_/layout,_N_T_/p/${id},product-${id}` },
    postponed: undefined,
    status: 200,
    segmentData: new Map([['/_tree', Buffer.from('tree')], ['/p/__PAGE__', Buffer.from([9, 8, 7])]]),
  };
}

const pageCtx = (revalidate: number | false, expire?: number) => ({ kind: 'APP_PAGE', isRoutePPREnabled: false, isFallback: false, cacheControl: { revalidate, expire } });

function entry(bytes: Uint8Array, revalidate = 60, tags: string[] = []): NextUseCacheEntry {
  return {
    value: new ReadableStream({
      start(c) {
        c.enqueue(bytes.slice(0, 2));
        c.enqueue(bytes.slice(2));
        c.close();
      },
    }),
    tags,
    stale: 30,
    timestamp: Date.now(),
    expire: 3600,
    revalidate,
  };
}

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  return Buffer.from(await new Response(stream).arrayBuffer());
}

describe('createCacheHandler', () => {
  it('refuses an unknown option by name, and a value of a kind Next does not store', async () => {
    expect(() => createCacheHandler({ redsi: 'x' } as never)).toThrow(InvalidOptionError);
    expect(() => createCacheHandler({ redsi: 'x' } as never)).toThrow(/redsi.*did you mean redis/);
    expect(() => createUseCacheHandler({ lockTTL: 1 } as never)).toThrow(/lockTTL/);
    await expect(pod().set(freshId('k'), { kind: 'SOMETHING' }, {})).rejects.toThrow(/data\.kind.*Next\.js 15\.5 and 16/);
  });

  it("what Next stores (strings, Buffers, a Map of Buffers, headers) reads back equal in another pod", async () => {
    const [a, b] = [pod(), pod()];
    const key = freshId('/p/');
    expect(await a.get(key, pageCtx(60))).toBeNull();
    const value = page(key);
    await a.set(key, value, pageCtx(60, 3600));
    const got = await waitUntil('the entry is stored', async () => (await b.get(key, pageCtx(60))) ?? undefined);
    expect(got.value).toEqual(value);
    const read = got.value as ReturnType<typeof page>;
    expect(Buffer.isBuffer(read.rscData)).toBe(true);
    expect(read.segmentData).toBeInstanceOf(Map);
    expect(Buffer.isBuffer(read.segmentData.get('/p/__PAGE__'))).toBe(true);
    expect(got.cacheControl).toEqual({ revalidate: 60, expire: 3600 });
    expect(got.lastModified).toBeLessThanOrEqual(Date.now());
  });

  it('a miss is rendered by one pod: the other waits for its set instead of answering "not found"', async () => {
    const [a, b, c] = [pod(), pod(), pod()];
    const key = freshId('/coalesce/');
    const first = await a.get(key, pageCtx(60));
    expect(first).toBeNull(); // a leads: it renders
    const waiting = [b.get(key, pageCtx(60)), c.get(key, pageCtx(60))];
    // Neither waiter answers "not found" while a renders.
    expect(await settledYet(Promise.race(waiting))).toBe(false);
    const value = page(key);
    await a.set(key, value, pageCtx(60));
    const answers = await Promise.all(waiting);
    for (const answer of answers) expect(answer?.value).toEqual(value);
  });

  it('a lead whose set never comes is handed back after lockTtl: one waiter renders next', async () => {
    const [a, b] = [pod({ lockTtl: 300 }), pod({ lockTtl: 300 })];
    const key = freshId('/abandoned/');
    expect(await a.get(key, pageCtx(60))).toBeNull();
    // a never sets; b is answered "not found" (it leads) once the lead is handed back, not after waitTimeout.
    expect(await b.get(key, pageCtx(60))).toBeNull();
  }, 8000);

  it('a stale entry is due for regeneration in one pod only; the others keep serving it', async () => {
    const pods = [pod(), pod(), pod()];
    const key = freshId('/stale/');
    await pods[0]!.set(key, page(key), pageCtx(1, 60));
    await waitUntil('the entry is stored', async () => (await pods[1]!.get(key, pageCtx(1))) ?? undefined);
    await sleep(1100); // past revalidate (1 s)
    const answers = await Promise.all(pods.map((p) => p.get(key, pageCtx(1))));
    const now = Date.now();
    const due = answers.filter((a) => a !== null && a.lastModified + 1000 < now);
    const fresh = answers.filter((a) => a !== null && a.lastModified + 1000 >= now);
    expect(due).toHaveLength(1);
    expect(fresh).toHaveLength(2);
    for (const a of answers) expect(a?.value).toEqual(page(key));
  });

  it('the first gets of two new factories, made while their connections open, coordinate through Redis: one "not found", one wait', async () => {
    const key = freshId('/connecting/');
    // Both factories made and asked at once, before either connection is up.
    const [a, b] = [pod(), pod()];
    const answers = [a.get(key, pageCtx(60)), b.get(key, pageCtx(60))];
    const first = await Promise.race(answers.map((p, i) => p.then((v) => ({ i, v }))));
    expect(first.v).toBeNull();
    const other = answers[1 - first.i]!;
    expect(await settledYet(other)).toBe(false);
    await [a, b][first.i]!.set(key, page(key), pageCtx(60));
    expect((await other)?.value).toEqual(page(key));
  });

  it('revalidateTag with an expire (a profile): the entries go stale, due for regeneration in one pod only', async () => {
    const pods = [pod(), pod(), pod()];
    const key = freshId('/profile/');
    await pods[0]!.set(key, page(key), pageCtx(3600));
    await waitUntil('the entry is stored', async () => (await pods[1]!.get(key, pageCtx(3600))) ?? undefined);
    await pods[2]!.revalidateTag([`product-${key}`], { expire: 3600 });
    const answers = await Promise.all(pods.map((p) => p.get(key, pageCtx(3600))));
    const now = Date.now();
    expect(answers.filter((a) => a !== null && a.lastModified + 3600_000 < now)).toHaveLength(1);
    expect(answers.filter((a) => a !== null && a.lastModified + 3600_000 >= now)).toHaveLength(2);
  });

  it('revalidateTag in one pod: the entries with the tag (and fetches with it as a soft tag) are a miss in the others', async () => {
    const [a, b] = [pod(), pod()];
    const key = freshId('/tagged/');
    await a.set(key, page(key), pageCtx(60));
    const fetchKey = freshId('fetch');
    const fetched = { kind: 'FETCH', data: { headers: {}, body: 'e30=', url: 'http://127.0.0.1/x', status: 200 }, revalidate: 60 };
    await a.set(fetchKey, fetched, { fetchCache: true, tags: ['inventory'], revalidate: 60 });
    expect((await b.get(key, pageCtx(60)))?.value).toEqual(page(key));
    expect((await b.get(fetchKey, { kind: 'FETCH', tags: ['inventory'], softTags: [`_N_T_${key}`] }))?.value).toEqual(fetched);

    // Within one pub/sub delivery of the invalidation (the library's bound for every write).
    await a.revalidateTag(`product-${key}`);
    await waitUntil('b reads the page as a miss', async () => (await b.get(key, pageCtx(60))) === null, 2000);
    await a.revalidateTag([`_N_T_${key}`]);
    await waitUntil('b reads the fetch as a miss', async () => (await b.get(fetchKey, { kind: 'FETCH', tags: ['inventory'], softTags: [`_N_T_${key}`] })) === null, 2000);
  });

  it('with Redis unreachable: get answers "not found", set and revalidateTag resolve (no wait for waitTimeout)', async () => {
    const down = new RedisServer();
    await down.start();
    const url = down.url;
    await down.stop();
    const Handler = createCacheHandler({ redis: url, commandTimeout: 200, waitTimeout: 60_000 });
    closers.push(() => Handler.close());
    const h = new Handler({});
    const key = freshId('/down/');
    expect(await h.get(key, pageCtx(60))).toBeNull();
    await h.set(key, page(key), pageCtx(60));
    await h.revalidateTag('x');
    expect(await h.get(freshId('/down/'), pageCtx(60))).toBeNull();
  }, 10_000);
});

describe('createUseCacheHandler', () => {
  it('an entry streamed in reads back byte-exact, a new stream for every get, in another pod', async () => {
    const [a, b] = [usePod(), usePod()];
    const key = freshId('uc');
    const bytes = new Uint8Array([1, 2, 3, 0, 255, 42]);
    expect(await a.get(key, [])).toBeUndefined();
    await a.set(key, Promise.resolve(entry(bytes, 60, ['catalog'])));
    const first = await waitUntil('stored', () => b.get(key, []));
    const second = await b.get(key, []);
    expect(first.value).not.toBe(second!.value);
    expect(await bytesOf(first.value)).toEqual(Buffer.from(bytes));
    expect(await bytesOf(second!.value)).toEqual(Buffer.from(bytes));
    expect(first).toMatchObject({ tags: ['catalog'], revalidate: 60, expire: 3600, stale: 30 });
  });

  it('a pending entry is awaited by the other pods: one run of the function', async () => {
    const [a, b] = [usePod(), usePod()];
    const key = freshId('uc-pending');
    expect(await a.get(key, [])).toBeUndefined();
    const waiting = b.get(key, []);
    let finish!: (e: NextUseCacheEntry) => void;
    const setting = a.set(key, new Promise((resolve) => (finish = resolve)));
    expect(await settledYet(waiting)).toBe(false);
    finish(entry(new Uint8Array([7, 7, 7])));
    await setting;
    const got = await waiting;
    expect(await bytesOf(got!.value)).toEqual(Buffer.from([7, 7, 7]));
  });

  it('updateTags and getExpiration: the stamps of the library, seen by every pod; soft tags make an entry a miss', async () => {
    const [a, b] = [usePod(), usePod()];
    const tag = freshId('tag');
    expect(await b.getExpiration([tag])).toBe(0);
    const before = Date.now();
    await a.updateTags([tag]);
    const at = await waitUntil('stamp seen', async () => (await b.getExpiration([tag])) || undefined);
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1000);
    // Next 15.5's form: tags as arguments.
    expect(Math.abs((await b.getExpiration(tag, freshId('other'))) - at)).toBeLessThan(50);

    const key = freshId('uc-soft');
    await a.set(key, Promise.resolve(entry(new Uint8Array([1]), 60, ['mine'])));
    const soft = `_N_T_/${freshId('page')}`;
    expect(await waitUntil('stored', () => b.get(key, [soft]))).toBeDefined();
    await a.updateTags([soft]);
    const c = usePod();
    // b leads the regeneration (within one pub/sub delivery of the invalidation).
    await waitUntil('b reads the entry as a miss', async () => (await b.get(key, [soft])) === undefined, 2000);
    // Another pod finding the same soft tag invalidated waits for b's regeneration.
    const waiting = c.get(key, [soft]);
    expect(await settledYet(waiting)).toBe(false);
    await b.set(key, Promise.resolve(entry(new Uint8Array([2]), 60, ['mine'])));
    expect(await bytesOf((await waiting)!.value)).toEqual(Buffer.from([2]));
    await a.updateTags(['mine'], { expire: 60 }); // stale: served
  });

  it('with Redis unreachable: get answers undefined and getExpiration 0', async () => {
    const down = new RedisServer();
    await down.start();
    const url = down.url;
    await down.stop();
    const h = createUseCacheHandler({ redis: url, commandTimeout: 200, waitTimeout: 60_000 });
    closers.push(() => h.close());
    expect(await h.get(freshId('uc'), [])).toBeUndefined();
    expect(await h.getExpiration(['a'])).toBe(0);
    await h.set(freshId('uc'), Promise.resolve(entry(new Uint8Array([1]))));
    await h.updateTags(['a']);
  }, 10_000);
});
