/**
 * Each option is declared once, in a table tied to its interface (src/shared/option-table.ts).
 * Proven here: a table has a row for every key of its interface and for no other (at compile
 * time: the `@ts-expect-error` lines below stop compiling if `satisfies` no longer catches
 * either); the names a bad options object is checked against ("known options are ...") are
 * the table's rows; the option tables of the docs list the same options with the defaults the
 * rows show; and a bad value is refused with a message naming the option.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCache, InvalidOptionError, MemoryLock, RedisLock, withLock } from '../src/index.js';
import { CACHE_TABLE, L1_TABLE, AUTO_RECOVERY_TABLE, type CacheOptions } from '../src/core/options.js';
import { EARLY_REFRESH_TABLE, FRESHNESS_TABLE } from '../src/core/freshness.js';
import { CALL_TABLE, INVALIDATE_TABLE, SET_TABLE } from '../src/core/call-options.js';
import { CLEAR_TABLE } from '../src/core/namespace.js';
import { COMPRESSION_TABLE } from '../src/store/compression.js';
import { HTTP_TABLE, resolveHttpCacheOptions } from '../src/http/options.js';
import { CACHED_TABLE, MODULE_ONLY_TABLE, MODULE_TABLE, resolveCachedOptions, splitModuleOptions } from '../src/nest/options.js';
import { ACQUIRE_TABLE, LOCK_TABLE } from '../src/lock/common.js';
import { REDIS_LOCK_TABLE } from '../src/lock/redis-lock.js';
import { MEMORY_LOCK_TABLE } from '../src/lock/memory-lock.js';
import { WITH_LOCK_TABLE } from '../src/lock/with-lock.js';
import { optionNames, type OptionRow, type OptionTable } from '../src/shared/option-table.js';
import { root } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';

type Table = Readonly<Record<string, OptionRow>>;

// ---- Compile time: `satisfies OptionTable<X>` wants exactly the keys of X. ----
const { jitter: _dropped, ...withoutJitter } = CACHE_TABLE;
// @ts-expect-error a table missing a row for a key of its interface does not compile
void (withoutJitter satisfies OptionTable<CacheOptions>);
// @ts-expect-error a table with a row for a key its interface lacks does not compile
void ({ ...CACHE_TABLE, lockTTL: CACHE_TABLE.lockTtl } satisfies OptionTable<CacheOptions>);

/** What the options object was checked against: the list in "unknown option ...; known options are a, b, c". */
function knownListOf(run: () => unknown): string[] {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(InvalidOptionError);
  const m = /known options are (.*)$/.exec((caught as Error).message);
  expect(m, (caught as Error).message).not.toBeNull();
  return m![1]!.split(', ');
}

async function knownListOfAsync(run: () => Promise<unknown>): Promise<string[]> {
  const error = await run().then(
    () => undefined,
    (e: unknown) => e,
  );
  return knownListOf(() => {
    throw error;
  });
}

const BOGUS = { zzzNotAnOption: 1 };

describe('the known-option list of every entry point is its table', () => {
  const server = useRedis();

  it('createCache and its nested options (l1, autoRecovery, compression, earlyRefresh)', async () => {
    expect(knownListOf(() => createCache(BOGUS as never))).toEqual(optionNames(CACHE_TABLE));
    expect(knownListOf(() => createCache({ l1: BOGUS } as never))).toEqual(optionNames(L1_TABLE));
    expect(knownListOf(() => createCache({ autoRecovery: BOGUS } as never))).toEqual(optionNames(AUTO_RECOVERY_TABLE));
    expect(knownListOf(() => createCache({ compression: BOGUS } as never))).toEqual(optionNames(COMPRESSION_TABLE));
    expect(knownListOf(() => createCache({ earlyRefresh: BOGUS } as never))).toEqual(optionNames(EARLY_REFRESH_TABLE));
    // The stale-serving options are rows of every table that takes them.
    for (const table of [CACHE_TABLE, CALL_TABLE, HTTP_TABLE, CACHED_TABLE] as Table[]) {
      expect(optionNames(table)).toEqual(expect.arrayContaining([...optionNames(FRESHNESS_TABLE)]));
    }
  });

  it('a call, set, invalidateTags and clear', async () => {
    const cache = createCache();
    try {
      expect(await knownListOfAsync(() => cache.getOrCompute('k', () => 1, { ttl: 1000, ...BOGUS } as never))).toEqual(optionNames(CALL_TABLE));
      expect(await knownListOfAsync(() => cache.set('k', 1, { ttl: 1000, ...BOGUS } as never))).toEqual(optionNames(SET_TABLE));
      expect(await knownListOfAsync(() => cache.invalidateTags(['t'], BOGUS as never))).toEqual(optionNames(INVALIDATE_TABLE));
      expect(await knownListOfAsync(() => cache.clear(BOGUS as never))).toEqual(optionNames(CLEAR_TABLE));
    } finally {
      await cache.close();
    }
  });

  it('the HTTP adapters, @Cached and DogpileModule', () => {
    expect(knownListOf(() => resolveHttpCacheOptions(BOGUS as never))).toEqual(optionNames(HTTP_TABLE));
    expect(knownListOf(() => resolveCachedOptions(BOGUS as never))).toEqual(optionNames(CACHED_TABLE));
    // The module builder's `isGlobal` rides beside the options.
    expect(knownListOf(() => splitModuleOptions(BOGUS as never))).toEqual([...optionNames(MODULE_TABLE), 'isGlobal']);
  });

  it('RedisLock, MemoryLock, acquire and withLock', async () => {
    const redis = server.client();
    expect(knownListOf(() => new RedisLock(redis, 'n', BOGUS as never))).toEqual(optionNames(REDIS_LOCK_TABLE));
    expect(knownListOf(() => new MemoryLock('n', BOGUS as never))).toEqual(optionNames(MEMORY_LOCK_TABLE));
    expect(await knownListOfAsync(() => new MemoryLock('n').acquire(BOGUS as never))).toEqual(optionNames(ACQUIRE_TABLE));
    expect(new Set(await knownListOfAsync(() => withLock('n', () => 1, BOGUS as never)))).toEqual(new Set(optionNames(WITH_LOCK_TABLE)));
    expect(optionNames(REDIS_LOCK_TABLE)).toEqual(expect.arrayContaining([...optionNames(LOCK_TABLE)]));
    expect(optionNames(MEMORY_LOCK_TABLE)).toEqual(expect.arrayContaining([...optionNames(LOCK_TABLE)]));
  });

  it('every row has a one-line doc', () => {
    const tables = [CACHE_TABLE, L1_TABLE, AUTO_RECOVERY_TABLE, COMPRESSION_TABLE, EARLY_REFRESH_TABLE, CALL_TABLE, SET_TABLE, INVALIDATE_TABLE, CLEAR_TABLE, HTTP_TABLE, CACHED_TABLE, MODULE_TABLE, REDIS_LOCK_TABLE, MEMORY_LOCK_TABLE, ACQUIRE_TABLE, WITH_LOCK_TABLE] as Table[];
    for (const table of tables) {
      for (const [name, row] of Object.entries(table)) {
        expect(row.doc, name).toMatch(/^\S.*\S$/);
        expect(row.doc, name).not.toContain('\n');
      }
    }
  });
});

// ---- The docs' option tables. ----

const page = (name: string): string => readFileSync(path.join(root, 'docs', name), 'utf8');

/** The rows of the first table after the line `heading` (or the line starting so, when it ends in …): option names (several per row allowed, `key(req)` is `key`) with the chosen cell. */
function docsTable(doc: string, heading: string, defaultColumn: number): Map<string, string> {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => l === heading || (heading.endsWith('…') && l.startsWith(heading.slice(0, -1))));
  if (start === -1) throw new Error(`no heading ${heading}`);
  const first = lines.findIndex((l, i) => i > start && l.startsWith('|'));
  const rows = new Map<string, string>();
  for (let i = first + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
    const cells = lines[i]!.split(/(?<!\\)\|/).map((c) => c.trim());
    for (const name of cells[1]!.split(/,\s*/)) rows.set(name.replace(/^`|`$/g, '').replace(/\(\w+\)$/, ''), cells[defaultColumn]!);
  }
  return rows;
}

/** The table's rows as the docs show them: name and shown default, `path` before each name. */
function shownRows(table: Table, path = ''): Map<string, string | undefined> {
  return new Map(Object.entries(table).map(([name, row]) => [`${path}${name}`, row.shown]));
}

describe("the docs' option tables agree with the rows", () => {
  it('docs/options.md: createCache', () => {
    expect(docsTable(page('options.md'), '# `createCache` options', 2)).toEqual(shownRows(CACHE_TABLE));
  });

  it('docs/express.md: the HTTP adapters', () => {
    expect(docsTable(page('express.md'), '# Express reference', 2)).toEqual(shownRows(HTTP_TABLE));
  });

  it('docs/lock.md: RedisLock and MemoryLock', () => {
    expect(docsTable(page('lock.md'), '# The lock', 2)).toEqual(shownRows({ ...REDIS_LOCK_TABLE, ...MEMORY_LOCK_TABLE }));
  });

  it('docs/compression.md: compression and its fields (default in the third column)', () => {
    const rows = docsTable(page('compression.md'), '## Options', 3);
    expect(rows).toEqual(new Map([['compression', 'off'], ...shownRows(COMPRESSION_TABLE, 'compression.')]));
    expect(CACHE_TABLE.compression.shown).toBe('`false`');
  });

  it('docs/nestjs.md: the options DogpileModule adds to those of createCache', () => {
    expect(docsTable(page('nestjs.md'), 'The options the module takes besides…', 2)).toEqual(shownRows(MODULE_ONLY_TABLE));
    expect(optionNames(MODULE_TABLE)).toEqual([...optionNames(CACHE_TABLE), ...optionNames(MODULE_ONLY_TABLE)]);
  });

  it('docs/nestjs.md: the options of @Cached, besides the stale-serving ones', () => {
    const listed = /Options are `\{ ([^}]*) \}`/.exec(page('nestjs.md'))![1]!.split(', ');
    const own = optionNames(CACHED_TABLE).filter((name) => !(name in FRESHNESS_TABLE));
    expect(listed).toEqual(own);
  });
});

// ---- Bad values: refused, naming the option. ----

describe('a bad value is refused with a message naming the option', () => {
  const refusals: [what: string, run: () => unknown, option: string, message: RegExp][] = [
    ['createCache lockTtl', () => createCache({ lockTtl: -1 }), 'lockTtl', /^Invalid lockTtl: must be greater than zero/],
    ['createCache l1.max', () => createCache({ l1: { max: 0 } }), 'l1.max', /^Invalid l1\.max: must be a positive integer, got number 0/],
    ['createCache l1', () => createCache({ l1: 'yes' } as never), 'l1', /^Invalid l1: expected true, false or \{ max, ttl, maxSize \}/],
    ['createCache onWaitTimeout', () => createCache({ onWaitTimeout: 'wait' } as never), 'onWaitTimeout', /^Invalid onWaitTimeout: expected 'throw' or 'load'/],
    ['createCache earlyRefresh.beta', () => createCache({ earlyRefresh: { beta: 0 } }), 'earlyRefresh.beta', /finite number greater than zero/],
    ['createCache compression.algorithm', () => createCache({ compression: { algorithm: 'lz4' } } as never), 'compression.algorithm', /expected one of 'zstd', 'brotli', 'gzip'/],
    ['createCache a misspelt option', () => createCache({ lockTTL: 1 } as never), 'lockTTL', /unknown option lockTTL \(did you mean lockTtl\?\)/],
    ['across fields: softTimeout ≥ hardTimeout', () => createCache({ softTimeout: 500, hardTimeout: 500 }), 'softTimeout', /shorter than hardTimeout/],
    ['across fields: replicaTimeout ≥ commandTimeout', () => createCache({ replicas: 1, replicaTimeout: 1000 }), 'replicaTimeout', /shorter than commandTimeout/],
    ['dogpileGuard refresh', () => resolveHttpCacheOptions({ refresh: 'later' } as never), 'refresh', /expected 'background' or 'foreground'/],
    ['dogpileGuard maxBodySize', () => resolveHttpCacheOptions({ maxBodySize: -1 }), 'maxBodySize', /whole number of bytes/],
    ['dogpileGuard skip', () => resolveHttpCacheOptions({ skip: 'no' } as never), 'skip', /expected a function \(req\) => boolean/],
    ['@Cached key', () => resolveCachedOptions({ key: 'k' } as never), 'key', /expected a function \(context\) => string/],
    ['DogpileModule ttl', () => splitModuleOptions({ ttl: 'soon' } as never), 'ttl', /is not a duration/],
    ['MemoryLock autoRenew', () => new MemoryLock('n', { autoRenew: 'yes' } as never), 'autoRenew', /expected true or false/],
    ['MemoryLock id', () => new MemoryLock('n', { id: 'a|b' }), 'id', /must not contain "\|"/],
  ];

  it.each(refusals)('%s', (_what, run, option, message) => {
    let caught: unknown;
    try {
      run();
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidOptionError);
    expect((caught as InvalidOptionError).option).toBe(option);
    expect((caught as Error).message).toMatch(message);
  });

  it('a call, set and acquire', async () => {
    const cache = createCache();
    try {
      await expect(cache.getOrCompute('k', () => 1, { ttl: 1000, forceRefresh: 'yes' } as never)).rejects.toMatchObject({ option: 'forceRefresh' });
      await expect(cache.getOrCompute('k', () => 1, { ttl: 1000, signal: {} } as never)).rejects.toThrow(/^Invalid signal: expected an AbortSignal/);
      await expect(cache.getOrCompute('k', () => 1, {} as never)).rejects.toMatchObject({ option: 'ttl' });
      await expect(cache.set('k', 1, { tags: [''] } as never)).rejects.toMatchObject({ option: 'ttl' });
      await expect(cache.set('k', 1, { ttl: 1000, tags: [''] })).rejects.toThrow(/^Invalid tags: tag 0 is empty/);
      await expect(cache.invalidateTags(['t'], { stale: 'yes' } as never)).rejects.toMatchObject({ option: 'stale' });
      await expect(new MemoryLock('n').acquire({ timeout: -1 })).rejects.toMatchObject({ option: 'timeout' });
    } finally {
      await cache.close();
    }
  });
});
