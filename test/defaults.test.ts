/**
 * The defaults the option tables of docs/ show, pinned twice: the table still shows the literal
 * written here, and the code resolves an omitted option to that literal. A default changed in
 * the code alone, or in the docs alone, fails here.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createCache, RedisLock, portableSerializer } from '../src/index.js';
import { resolveLockOptions } from '../src/lock/common.js';
import { resolveHttpCacheOptions } from '../src/http/options.js';
import { root } from '../tools/child-process.js';
import { useRedis } from './support/use-redis.js';

const page = (name: string): string => readFileSync(path.join(root, 'docs', name), 'utf8');
const OPTIONS = page('options.md');

/** The "default" cell of `option`'s row in the first table after the heading `heading` of the docs page `doc`. */
function readmeDefault(heading: string, option: string, doc = OPTIONS): string {
  const start = `\n${doc}`.indexOf(`\n${heading}\n`);
  if (start === -1) throw new Error(`docs have no heading ${heading}`);
  const lines = `\n${doc}`.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  for (let i = first; i < lines.length && lines[i]!.startsWith('|'); i++) {
    const cells = lines[i]!.split(/(?<!\\)\|/).map((c) => c.trim());
    if (cells[1] === `\`${option}\``) return cells[2]!;
  }
  throw new Error(`the table under ${heading} has no row for ${option}`);
}

describe('createCache: the README table "createCache options"', () => {
  const heading = '# `createCache` options';
  const table: [option: string, readme: string][] = [
    ['redis', 'none'],
    ['prefix', "`'dogpile'`"],
    ['l1', '`false`'],
    ['maxEntries', '`10000`'],
    ['lockTtl', '`5000` ms'],
    ['waitTimeout', '`10000` ms'],
    ['onWaitTimeout', "`'throw'`"],
    ['onRemoteError', "`'throw'`"],
    ['commandTimeout', '`1000` ms'],
    ['backendCooldown', '`1000` ms'],
    ['inlineMax', '`65536` bytes'],
    ['serializer', '`portableSerializer`'],
    ['hitForMissTtl', '`0`'],
    ['replicas', '`0`'],
    ['replicaTimeout', '`100` ms'],
    ['tagStampTtl', "`'7d'`"],
    ['jitter', '`0`'],
    ['autoRecovery', '`false`'],
    ['compression', '`false`'],
    ['staleWhileRevalidate', '`0` (off)'],
    ['staleIfError', '`0` (off)'],
    ['failSafeRetry', '`1000` ms'],
    ['softTimeout', 'none'],
    ['hardTimeout', 'none'],
    ['earlyRefresh', '`false`'],
  ];

  it.each(table)('%s: the docs show %s', (option, shown) => {
    expect(readmeDefault(heading, option)).toBe(shown);
  });

  it('an omitted option resolves to the value the docs show', async () => {
    const cache = createCache();
    const o = cache.options;
    expect(o.redis).toBeUndefined();
    expect(o.prefix).toBe('dogpile');
    expect(o.l1).toBeUndefined();
    expect(o.maxEntries).toBe(10_000);
    expect(o.jitter).toBe(0);
    expect(o.autoRecovery).toBeUndefined();
    expect(o.compression).toBeUndefined();
    expect(o.lockTtl).toBe(5000);
    expect(o.waitTimeout).toBe(10_000);
    expect(o.onWaitTimeout).toBe('throw');
    expect(o.onRemoteError).toBe('throw');
    expect(o.commandTimeout).toBe(1000);
    expect(o.backendCooldown).toBe(1000);
    expect(o.inlineMax).toBe(65_536);
    expect(o.serializer).toBe(portableSerializer);
    expect(o.hitForMissTtl).toBe(0);
    expect(o.replication).toBeUndefined();
    expect(o.tagStampTtl).toBe(7 * 24 * 3600 * 1000);
    expect(o.freshness).toEqual({ staleWhileRevalidate: 0, staleIfError: 0, failSafeRetry: 1000, softTimeout: 0, hardTimeout: 0, earlyRefreshBeta: 0 });
    await cache.close();
  });

  it('l1: true is { max: 1000, ttl: 1000 }; earlyRefresh: true is β 1; replicas alone wait 100 ms', async () => {
    expect(readmeDefault(heading, 'l1')).toBe('`false`');
    expect(OPTIONS).toContain('`true` or `{ max: 1000, ttl: 1000 }`');
    expect(OPTIONS).toContain('`true` or `{ beta }` (β, default 1)');
    const cache = createCache({ l1: true, earlyRefresh: true, replicas: 1 });
    expect(cache.options.l1).toEqual({ max: 1000, ttl: 1000 });
    expect(cache.options.freshness.earlyRefreshBeta).toBe(1);
    expect(cache.options.replication).toEqual({ replicas: 1, timeout: 100 });
    await cache.close();
  });
});

describe('RedisLock and MemoryLock: the README table of lock options', () => {
  const heading = '# The lock';
  const LOCK = page('lock.md');
  const server = useRedis();
  let redis: Redis;
  beforeAll(() => {
    redis = server.client();
  });

  it.each([
    ['ttl', '`10000` ms'],
    ['autoRenew', '`true`'],
    ['timeout', '`10000` ms'],
    ['id', '`hostname:pid`'],
    ['prefix', "`'dogpile'`"],
    ['replicas', '`0`'],
    ['replicaTimeout', '`100` ms'],
  ])('%s: the docs show %s', (option, shown) => {
    expect(readmeDefault(heading, option, LOCK)).toBe(shown);
  });

  it('an omitted option resolves to the value the docs show', () => {
    expect(resolveLockOptions(undefined)).toEqual({ ttl: 10_000, autoRenew: true, timeout: 10_000, id: `${hostname()}:${process.pid}`, prefix: 'dogpile' });
  });

  it('a lock taken with no options lives under dogpile:lock:{name} for 10 s, owned by hostname:pid', async () => {
    const lock = new RedisLock(redis, 'defaults');
    await lock.acquire();
    const key = 'dogpile:lock:{defaults}';
    expect(await redis.get(key)).toMatch(new RegExp(`\\|${hostname()}:${process.pid}$`));
    const left = await redis.pttl(key);
    // At most its 10 s; far more than the 5 s of any other default, whatever the machine's load.
    expect(left).toBeLessThanOrEqual(10_000);
    expect(left).toBeGreaterThan(5_000);
    expect(await lock.getOwnerId()).toBe(`${hostname()}:${process.pid}`);
    await lock.release();
  });
});

describe('HTTP adapters: the README table of dogpileGuard / dogpileGuardPlugin options', () => {
  const heading = '# Express reference';
  const EXPRESS = page('express.md');

  it.each([
    ['cache', 'the default cache'],
    ['ttl', '`60_000`'],
    ['maxTtl', '`86_400_000` (1 day)'],
    ['statuses', '`[200]`'],
    ['cacheStatusName', "`'dogpile-guard'`"],
    ['maxBodySize', '`1_048_576` (1 MiB)'],
    ['hitForMissTtl', '`5000`'],
    ['privateHeaders', "`['authorization', 'cookie']`"],
  ])('%s: the docs show %s', (option, shown) => {
    expect(readmeDefault(heading, option, EXPRESS)).toBe(shown);
  });

  it('an omitted option resolves to the value the docs show', () => {
    const o = resolveHttpCacheOptions(undefined);
    expect(o.cache).toBeUndefined();
    expect(o.ttl).toBe(60_000);
    expect(o.maxTtl).toBe(86_400_000);
    expect([...o.statuses]).toEqual([200]);
    expect(o.cacheStatusName).toBe('dogpile-guard');
    expect(o.maxBodySize).toBe(1_048_576);
    expect(o.hitForMissTtl).toBe(5000);
    expect(o.privateHeaders).toEqual(['authorization', 'cookie']);
    expect(o.key).toBeUndefined();
    expect(o.skip).toBeUndefined();
    expect(o.tags).toBeUndefined();
  });
});
