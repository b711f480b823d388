/**
 * The cache's cross-process claims, proven with real Node processes on one real Redis.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, type JsonChild } from '../tools/child-process.js';
import { Fleet } from '../tools/fleet/fleet.js';
import type { RunReport } from '../tools/fleet/plan.js';

interface CallResult {
  ok: boolean;
  value?: { pid: number; run: number; padBytes?: number };
  status?: string;
  name?: string;
  code?: string;
  message?: string;
  causeName?: string;
}

const server = useRedis();
let redis: Redis;
let keyN = 0;

beforeAll(() => {
  redis = server.client();
});
const fleets: Fleet[] = [];
afterEach(async () => {
  await Promise.all(fleets.splice(0).map((f) => f.close()));
  await killAllChildren();
});
afterAll(async () => {
  await killAllChildren();
});

interface Hammer {
  fleet: Fleet;
  /** Every process (or those given) makes its `concurrency` calls at once; each one's report. */
  go(members?: JsonChild[]): Promise<RunReport>[];
}

/** `count` processes of the get-or-compute scenario on one key, each ready to make `concurrency` calls at once. */
async function startWorkers(count: number, { concurrency, lockTtl = 5000, inlineMax, ...config }: { concurrency: number; lockTtl?: number; inlineMax?: number } & Record<string, unknown>): Promise<Hammer> {
  const cache = { lockTtl, waitTimeout: 30_000, ...(inlineMax === undefined ? {} : { inlineMax }) };
  const fleet = await Fleet.start('get-or-compute', count, { url: server.url, ...config, cache });
  fleets.push(fleet);
  return { fleet, go: (members) => fleet.launch({ mode: 'burst', calls: concurrency }, { timeoutMs: 40_000 }, members) };
}

async function commandCalls(): Promise<Record<string, number>> {
  const info = String(await server.command('INFO', 'commandstats'));
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

function diff(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
}

async function results(reports: Promise<RunReport>[]): Promise<CallResult[]> {
  return (await Promise.all(reports)).flatMap((r) => r.records as CallResult[]);
}

describe('getOrCompute across processes', () => {
  it('8 processes × 100 concurrent calls on a cold key run the loader exactly once', async () => {
    const key = `cold-${++keyN}`;
    const { fleet, go } = await startWorkers(8, { key, concurrency: 100, loaderMs: 200 });
    const before = await commandCalls();
    const all = await results(go());
    const used = diff(await commandCalls(), before);
    // Per process: one lookup (lead or wait); waiters subscribe and look once more; the leader
    // stores-releases-announces. Waiters take the value from the announcement: no GET of their
    // own (Redis also counts commands run inside scripts, and each script runs exactly one GET).
    // Besides, once in its life, each process reads its cache's generation stamp (clear()) and
    // subscribes to its channel: at most one GET and one SUBSCRIBE more per process.
    expect(used.evalsha ?? 0).toBeLessThanOrEqual(8 * 2 + 1);
    expect(used.get ?? 0).toBeGreaterThanOrEqual(used.evalsha!);
    expect(used.get ?? 0).toBeLessThanOrEqual(used.evalsha! + 8);
    expect(used.subscribe ?? 0).toBeLessThanOrEqual(7 + 8);
    expect(all).toHaveLength(800);
    expect(all.filter((r) => !r.ok)).toEqual([]);
    expect(await redis.get(`${key}:runs`)).toBe('1');
    const values = new Set(all.map((r) => JSON.stringify(r.value)));
    expect(values.size).toBe(1);
    const statuses = all.map((r) => r.status);
    expect(statuses.filter((s) => s === 'miss')).toHaveLength(1);
    expect(statuses.every((s) => s === 'miss' || s === 'coalesced' || s === 'hit')).toBe(true);
    // no subscription is left behind once everyone is served
    await fleet.close();
    expect(await redis.call('PUBSUB', 'NUMSUB', `dogpile:c:{${key}}`)).toEqual([`dogpile:c:{${key}}`, 0]);
  });

  it('a 5 s loader with a 1 s lock TTL still runs exactly once, with no waiter errors', async () => {
    const key = `slow-${++keyN}`;
    const { go } = await startWorkers(4, { key, concurrency: 25, loaderMs: 5000, lockTtl: 1000 });
    const all = await results(go());
    expect(all.filter((r) => !r.ok)).toEqual([]);
    expect(all).toHaveLength(100);
    expect(await redis.get(`${key}:runs`)).toBe('1');
    expect(new Set(all.map((r) => r.value?.pid)).size).toBe(1);
  });

  it('when the leader is killed mid-loader, exactly one new loader run serves everyone soon after the lock TTL', async () => {
    const key = `crash-${++keyN}`;
    const lockTtl = 1000;
    const { fleet, go } = await startWorkers(4, { key, concurrency: 20, loaderMs: 1500, lockTtl });
    const reports = go();
    const leader = await Promise.race(fleet.members.map((w) => w.take('loader', 40_000).then(() => w)));
    const killedAt = Date.now();
    leader.kill('SIGKILL');
    const all = await results(reports.filter((_, i) => fleet.members[i] !== leader));
    const servedAt = Date.now();
    expect(all).toHaveLength(60);
    expect(all.filter((r) => !r.ok)).toEqual([]);
    expect(await redis.get(`${key}:runs`)).toBe('2');
    expect(new Set(all.map((r) => r.value?.run))).toEqual(new Set([2]));
    // takeover waits for the dead leader's lock to expire, then one 1.5 s loader run
    expect(servedAt - killedAt).toBeGreaterThanOrEqual(1500);
  });

  it('a big value shared but not stored reaches the waiters of every process: the loader runs once', async () => {
    const key = `share-${++keyN}`;
    const { go } = await startWorkers(4, { key, concurrency: 5, loaderMs: 500, share: true, inlineMax: 1024, padBytes: 200_000 });
    const all = await results(go());
    expect(all.filter((r) => !r.ok)).toEqual([]);
    expect(all).toHaveLength(20);
    expect(await redis.get(`${key}:runs`)).toBe('1');
    expect(new Set(all.map((r) => JSON.stringify(r.value))).size).toBe(1);
    expect(all[0]!.value!.padBytes).toBe(200_000);
    expect(all.filter((r) => r.status === 'miss')).toHaveLength(1);
    // shared, not stored: no value; the waiters' copy lives at most a lock TTL
    expect(await redis.exists(`dogpile:v:{${key}}`)).toBe(0);
    const left = await redis.pttl(`dogpile:s:{${key}}`);
    expect(left === -2 || (left > 0 && left <= 5000)).toBe(true);
  });

  it('a loader error reaches every waiter in every process, is not cached, and runs once', async () => {
    const key = `fail-${++keyN}`;
    const { go } = await startWorkers(4, { key, concurrency: 25, loaderMs: 300, fail: true });
    const all = await results(go());
    expect(all).toHaveLength(100);
    expect(all.every((r) => !r.ok)).toBe(true);
    expect(await redis.get(`${key}:runs`)).toBe('1');
    const local = all.filter((r) => r.name === 'TypeError');
    const remote = all.filter((r) => r.name === 'RemoteLoaderError');
    expect(local.length).toBe(25); // the leader's process gets the original error
    expect(remote.length).toBe(75);
    for (const r of remote) {
      expect(r.code).toBe('E_LOADER');
      expect(r.causeName).toBe('TypeError');
      expect(r.message).toContain('loader failed in');
    }
    expect(await redis.exists(`dogpile:v:{${key}}`)).toBe(0);
  });
});
