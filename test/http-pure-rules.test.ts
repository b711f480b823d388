/**
 * The HTTP layer's storage and leader decisions are pure functions of the run (its plan and
 * what its handler answered) and the rules in force: no cache, no guard, no `this`. Each is
 * checked here on facts built by hand, and the modules that hold them are shown to import
 * nothing that reaches a cache at run time.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FRESHNESS_DEFAULTS } from '../src/core/freshness.js';
import { responseFreshness } from '../src/http/rules/freshness.js';
import { leaderNotModified, leaderStatus, revalidated304 } from '../src/http/rules/leader-rules.js';
import type { CachePlan, LeaderRun } from '../src/http/flow/plan-types.js';
import { encodeResponse } from '../src/http/rules/response-format.js';
import { responseVerdict, storageTtl, type StoreRules } from '../src/http/rules/response-store.js';
import { toServable, type ServableResponse } from '../src/http/flow/serve.js';
import { reuseOf } from '../src/http/flow/stale-on-error.js';

const root = path.resolve(import.meta.dirname, '..');
const NOW = Date.UTC(2026, 0, 1);

const rules: StoreRules = { maxTtl: 3_600_000, maxBodySize: 1024, statuses: new Set([200]), cacheFreshness: FRESHNESS_DEFAULTS };

function plan(extra: Partial<CachePlan> = {}): CachePlan {
  return { head: false, url: '/a', userKey: false, base: 'k', key: 'k', ttl: 30_000, headers: { host: 'example.test' }, retried: false, freshness: {}, ...extra };
}

function run(extra: Partial<LeaderRun> = {}): LeaderRun {
  return { plan: plan(), conditional: {}, revalidating: undefined, fallback: undefined, targeted: undefined, tagged: undefined, ...extra };
}

function response(headers: Record<string, string>, status = 200, body = 'hello') {
  return { status, headers, tooBig: false, body: [Buffer.from(body)], startedAt: 0 };
}

function stored(headers: [string, string][], freshFor = 60_000): ServableResponse {
  const bytes = encodeResponse({ createdAt: NOW, status: 200, headers, vary: [], body: Buffer.from('hello'), freshFor, ageOnArrival: 0 });
  return toServable(bytes)!;
}

describe('the storage rules (response-store.ts)', () => {
  it('store a response for its own lifetime, and one with a validator past it, for revalidation', () => {
    const plain = responseVerdict(run(), response({ 'cache-control': 'max-age=60' }), rules, NOW);
    expect(plain.store && [plain.storeFor, plain.decision.ttl]).toEqual([60_000, 60_000]);
    const validated = responseVerdict(run(), response({ 'cache-control': 'max-age=60', etag: '"v1"' }), rules, NOW);
    expect(validated.store && validated.storeFor).toBe(60_000 + 30_000);
  });

  it('refuse what its headers forbid, and share nothing too big without calling it refused', () => {
    expect(responseVerdict(run(), response({ 'cache-control': 'no-store' }), rules, NOW)).toEqual({ store: false, refused: true });
    expect(responseVerdict(run(), response({ vary: '*' }), rules, NOW)).toEqual({ store: false, refused: true });
    expect(responseVerdict(run(), { ...response({}), tooBig: true }, rules, NOW)).toEqual({ store: false, refused: false });
  });

  it("read the handler's Dogpile-Cache-Control and Dogpile-Tags from the run", () => {
    const targeted = responseVerdict(run({ targeted: 'max-age=5' }), response({ 'cache-control': 'max-age=60' }), rules, NOW);
    expect(targeted.store && targeted.decision.ttl).toBe(5_000);
    const tagged = responseVerdict(run({ tagged: 'a, b' }), response({ 'cache-control': 'max-age=60' }), rules, NOW);
    expect(tagged.store && tagged.decision.tags).toEqual(['a', 'b']);
  });

  it('keep a response with a validator no longer than its lifetime when a stale window keeps it anyway', () => {
    const f = responseFreshness(200, { 'cache-control': 'max-age=60', etag: '"v1"' }, { now: NOW, defaultTtl: 30_000, maxTtl: rules.maxTtl, statuses: rules.statuses });
    if (!f.storable) throw new Error('expected a storable response');
    expect(storageTtl(plan(), f, { etag: '"v1"' }, rules)).toBe(90_000);
    expect(storageTtl(plan({ freshness: { staleWhileRevalidate: 10_000 } }), f, { etag: '"v1"' }, rules)).toBe(60_000);
  });
});

describe('the leader rules (leader-rules.ts)', () => {
  it("say stored only for what the capture will store, and stale for a revalidation's renewing 304", () => {
    expect(leaderStatus(run(), 200, { 'cache-control': 'max-age=60' }, rules, NOW, false)).toEqual({ fwd: 'miss' });
    expect(leaderStatus(run(), 200, { 'cache-control': 'max-age=60' }, rules, NOW, true)).toEqual({ fwd: 'miss', stored: true, ttl: 60_000 });
    expect(leaderStatus(run(), 200, { 'cache-control': 'max-age=60', 'content-length': '2048' }, rules, NOW, true)).toEqual({ fwd: 'miss' });
    const revalidating = stored([['etag', '"v1"'], ['cache-control', 'max-age=60']]);
    expect(leaderStatus(run({ revalidating }), 304, { etag: '"v1"' }, rules, NOW, true)).toEqual({ fwd: 'stale', fwdStatus: 304, stored: true });
    expect(leaderStatus(run({ revalidating }), 304, { etag: '"v2"' }, rules, NOW, true)).toEqual({ fwd: 'stale', fwdStatus: 304 });
  });

  it("answer the leader's own conditional request, and a renewing 304 with the stored response", () => {
    expect(leaderNotModified(run({ conditional: { 'if-none-match': '"v1"' } }), 200, { etag: '"v1"' })).toBe(true);
    expect(leaderNotModified(run(), 200, { etag: '"v1"' })).toBe(false);
    const revalidating = stored([['etag', '"v1"'], ['cache-control', 'max-age=60']]);
    const renewed = revalidated304(run({ revalidating }), 304, { etag: '"v1"' }, NOW);
    expect([renewed?.status, renewed?.body.toString(), renewed?.headers['content-length']]).toEqual([200, 'hello', '5']);
    expect(revalidated304(run({ revalidating, conditional: { 'if-none-match': '"v1"' } }), 304, { etag: '"v1"' }, NOW)?.status).toBe(304);
  });
});

describe('reuse of a stored response (reuseOf)', () => {
  const fresh = stored([]);
  it('serves it while fresh, revalidates a stale hit, and leaves a collapsed stale answer to the handler', () => {
    expect(reuseOf(fresh, 1, 'HIT', true, {}, FRESHNESS_DEFAULTS)).toBe('HIT');
    expect(reuseOf(fresh, -5_000, 'STALE', true, {}, FRESHNESS_DEFAULTS)).toBe('STALE');
    expect(reuseOf(fresh, -5_000, 'HIT', true, {}, FRESHNESS_DEFAULTS)).toBe('revalidate');
    expect(reuseOf(fresh, -5_000, 'HIT', false, {}, FRESHNESS_DEFAULTS)).toBe('handler');
    expect(reuseOf(fresh, -5_000, 'COALESCED', true, {}, FRESHNESS_DEFAULTS)).toBe('handler');
  });

  it("serves it stale at its entry's edge inside the route's stale-while-revalidate window", () => {
    expect(reuseOf(fresh, -10, 'HIT', true, { staleWhileRevalidate: 5_000 }, FRESHNESS_DEFAULTS)).toBe('STALE');
    expect(reuseOf(fresh, -10, 'HIT', true, {}, FRESHNESS_DEFAULTS)).toBe('revalidate');
  });
});

describe('the modules of pure rules', () => {
  for (const file of ['src/http/rules/response-store.ts', 'src/http/rules/leader-rules.ts', 'src/http/flow/stale-on-error.ts']) {
    it(`${file} imports nothing that reaches a cache at run time, and holds no class`, () => {
      const source = readFileSync(path.join(root, file), 'utf8');
      const valueImports = [...source.matchAll(/^import (?!type )[^;]*from '([^']+)'/gm)].map((m) => m[1]);
      expect(valueImports.filter((from) => from!.startsWith('../core/') && from !== '../core/freshness.js')).toEqual([]);
      expect(valueImports.filter((from) => /response-writes|guard|cache-calls/.test(from!))).toEqual([]);
      expect(source).not.toMatch(/^export (abstract )?class /m);
      expect(source).not.toMatch(/\bthis\./);
    });
  }
});
