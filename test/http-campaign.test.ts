/**
 * The differential HTTP campaign in the suite: first the oracle itself on hand-made replies
 * (each rule finds what it names and accepts what a cache may do), then a short campaign on
 * every adapter against real processes and a real Redis, which fails on any violation. The seed
 * is random unless HTTP_CAMPAIGN_SEED is set; a failure names it and the file the shrunk case
 * was written to (`npm run http-campaign -- --replay FILE` runs it again).
 */
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADAPTERS } from './http-campaign/apps.js';
import { replay, report, runCampaign, signature } from './http-campaign/campaign.js';
import { requestBytes, unconditional, type Case } from './http-campaign/model.js';
import { difference, notModified, rangeOf, unstorable } from './http-campaign/oracle.js';
import { sentRequest, unmatchedRun } from './http-campaign/runs.js';
import type { WireReply } from './http-campaign/wire.js';

function reply(status: number, fields: [string, string][], body = ''): WireReply {
  return { status, fields, body: Buffer.from(body) };
}

describe('the HTTP campaign oracle', () => {
  const app = reply(200, [['content-type', 'application/json'], ['content-length', '13'], ['etag', '"v1"']], '{"route":"a"}');

  it('finds another body, status or field of the app, and ignores what a cache adds or takes off', () => {
    expect(difference(reply(200, app.fields, '{"route":"b"}'), app, false)).toMatch(/^body/);
    expect(difference(reply(404, app.fields, '{"route":"a"}'), app, false)).toMatch(/^status 404/);
    expect(difference(reply(200, [...app.fields, ['x-other', '1']], '{"route":"a"}'), app, false)).toMatch(/^fields/);
    const cached = reply(200, [...app.fields, ['age', '3'], ['x-cache', 'HIT'], ['cache-status', 'dogpile-guard; hit'], ['date', 'now']], '{"route":"a"}');
    expect(difference(cached, app, false)).toBeUndefined();
    expect(difference(cached, reply(200, [...app.fields, ['dogpile-cache-control', 'max-age=1']], '{"route":"a"}'), false)).toBeUndefined();
    // A HEAD has no body to compare, and its length may be left out.
    expect(difference(reply(200, [['content-type', 'application/json'], ['etag', '"v1"']]), app, true)).toBeUndefined();
  });

  it('accepts a 304 only for a condition the full answer satisfies, and a 206 only for the slice it names', () => {
    expect(notModified({ inm: '"v1"' }, app)).toBe(true);
    expect(notModified({ inm: 'W/"v1", "x"' }, app)).toBe(true);
    expect(notModified({ inm: '"v2"' }, app)).toBe(false);
    expect(notModified({ ims: 'Thu, 01 Jan 2026 00:00:00 GMT' }, reply(200, [['last-modified', 'Wed, 01 Jan 2025 00:00:00 GMT']]))).toBe(true);
    expect(notModified({ ims: 'Mon, 01 Jan 2024 00:00:00 GMT' }, reply(200, [['last-modified', 'Wed, 01 Jan 2025 00:00:00 GMT']]))).toBe(false);
    expect(rangeOf(reply(206, [['content-range', 'bytes 0-4/13']], '{"rou'), app)).toBeUndefined();
    expect(rangeOf(reply(206, [['content-range', 'bytes 0-4/13']], '{"xyz'), app)).toMatch(/is not bytes 0-4/);
    expect(rangeOf(reply(206, [['content-range', 'bytes 0-4/20']], '{"rou'), app)).toMatch(/20-byte body/);
  });

  it('names what a shared cache must not serve to another client', () => {
    expect(unstorable(reply(200, [['set-cookie', 'a=1']]))).toBe('Set-Cookie');
    expect(unstorable(reply(200, [['cache-control', 'public, private']]))).toBe('Cache-Control: private');
    expect(unstorable(reply(200, [['cache-control', 'no-store']]))).toBe('Cache-Control: no-store');
    expect(unstorable(reply(200, [['cache-control', 'max-age=60']]))).toBeUndefined();
  });

  it('writes each request of a case as exact bytes, and tells violations apart by what differs', () => {
    const c: Case = { pool: [{ path: '/d/../secret', query: [['%61', '1'], ['a', '2']] }], actions: [] };
    const bytes = requestBytes(c, { do: 'request', resource: 0, method: 'GET', form: 'absolute-other', reverseQuery: true, headers: { host: 'upper', conditional: 'inm-v1', range: 'bytes=0-9' }, copies: 1 }, 'h.test');
    expect(bytes).toBe('GET http://evil.test/d/../secret?a=2&%61=1 HTTP/1.1\r\nHost: H.TEST\r\nIf-None-Match: "v1"\r\nRange: bytes=0-9\r\nConnection: close\r\n\r\n');
    expect(unconditional(bytes)).toBe('GET http://evil.test/d/../secret?a=2&%61=1 HTTP/1.1\r\nHost: H.TEST\r\nConnection: close\r\n\r\n');
    const v = { kind: 'wrong-answer', adapter: 'koa' as const, action: 0, request: bytes, message: 'X-Cache HIT: body ...', host: 'h.test' };
    expect(signature({ ...v, differs: 'path' })).toBe('wrong-answer: path');
    expect(signature({ ...v, kind: 'no-reply', message: 'socket error: x' })).toBe('no-reply: socket error');
  });
});

describe('the HTTP campaign oracle on handler runs', () => {
  const sent = sentRequest('GET /vary/a?b=1 HTTP/1.1\r\nHost: c1.test\r\nAccept-Language: en\r\nAccept-Language: de\r\nX-Forwarded-Host: evil.test\r\nCookie: sid=1\r\nConnection: close\r\n\r\n');
  const run = (headers: Record<string, string>, target = '/vary/a?b=1', method = 'GET') => ({ adapter: 'express' as const, pid: 1, at: 0, method, target, headers, refresh: headers.connection === undefined });
  const validators = new Set(['"v1"']);

  it('accepts a live run of a sent request, and a refresh with only the fields the docs let it carry', () => {
    const live = { host: 'c1.test', 'accept-language': 'en, de', 'x-forwarded-host': 'evil.test', cookie: 'sid=1', connection: 'close' };
    expect(unmatchedRun('express', run(live), [sent], [], validators)).toBeUndefined();
    // A HEAD may run as its GET; a revalidation adds the stored validator and leaves out the client's.
    expect(unmatchedRun('express', run(live), [{ ...sent, method: 'HEAD' }], [], validators)).toBeUndefined();
    expect(unmatchedRun('express', run({ ...live, 'if-none-match': '"v1"' }), [sent], [], validators)).toBeUndefined();
    expect(unmatchedRun('express', run({ host: 'c1.test', 'accept-language': 'en, de', 'x-forwarded-host': 'evil.test', 'if-none-match': '"v1"' }), [sent], ['accept-language'], validators)).toBeUndefined();
    // A web adapter's URL: the same path and query.
    expect(unmatchedRun('hono', run({ host: 'c1.test' }, 'http://c1.test/vary/a?b=1'), [sent], [], validators)).toBeUndefined();
  });

  it('finds a run that saw another target, a field no request sent, or a refresh carrying a client field', () => {
    expect(unmatchedRun('express', run({ host: 'c1.test' }, '/vary/a?b=2'), [sent], [], validators)).toMatch(/sent by no request/);
    expect(unmatchedRun('express', run({ host: 'c1.test', 'accept-language': 'fr', connection: 'close' }), [sent], ['accept-language'], validators)).toMatch(/accept-language/);
    expect(unmatchedRun('express', run({ host: 'c1.test', cookie: 'sid=1' }), [sent], [], validators)).toMatch(/cookie: "sid=1", a field a refresh does not carry/);
    expect(unmatchedRun('express', run({ host: 'c1.test', 'user-agent': 'x' }), [sent], [], validators)).toMatch(/user-agent/);
    expect(unmatchedRun('express', run({ host: 'c1.test', 'if-none-match': '"v9"' }), [sent], [], validators)).toMatch(/a validator of no reply/);
    expect(unmatchedRun('express', run({ host: 'other.test' }), [sent], [], validators)).toMatch(/host: "other.test", sent by no request/);
  });
});

describe('the HTTP campaign', () => {
  it('judges a 304 to If-None-Match: * on a route whose body fails mid-stream by the head its handler sent', async () => {
    // Found by `npm run http-campaign -- --minutes 3 --seed 20261129`: the guard answers the
    // leader's own client 304 from the handler's 200 head; the bare app's body breaks, and the
    // oracle, asking it for the whole answer to compare with, stopped the search.
    const c: Case = { pool: [{ path: '/broken/a', query: [['%61', '1']] }], actions: [{ do: 'request', resource: 0, method: 'GET', form: 'origin', reverseQuery: false, headers: { conditional: 'inm-star' }, copies: 1 }] };
    for (const adapter of ['koa', 'express'] as const) expect(await replay(adapter, c, false, 1), adapter).toBeUndefined();
  }, 120_000);

  it('judges a 304 on a /broken/ path that the app routes elsewhere as any answer: a stored response may give it', async () => {
    // Found by `npm run http-campaign -- --minutes 2 --seed 20261209`: Fastify's handler sees an
    // absolute-form target as its path, so `HEAD http://evil.test/broken/a` is answered whole
    // (the catch-all route) and stored; another of the same requests, with `If-None-Match: *`,
    // is then rightly answered 304 from the store, which the oracle took for a broken body served.
    const c: Case = { pool: [{ path: '/broken/a', query: [] }], actions: [{ do: 'request', resource: 0, method: 'HEAD', form: 'absolute-other', reverseQuery: false, headers: { conditional: 'inm-star' }, copies: 3 }] };
    expect(await replay('fastify', c, false, 2)).toBeUndefined();
  }, 120_000);

  it('finds no answer from the guard that the bare app would not give, on any adapter', async () => {
    const seed = process.env.HTTP_CAMPAIGN_SEED !== undefined ? Number(process.env.HTTP_CAMPAIGN_SEED) : Math.floor(Math.random() * 2 ** 31);
    const lines: string[] = [`http campaign seed ${seed}`];
    const results = await runCampaign({ seed, adapters: ADAPTERS, searchMs: 30_000, maxCases: 30, shrinkMs: 20_000, failuresDir: path.join(os.tmpdir(), 'dogpile-guard-http-campaign') });
    report(results, (line) => lines.push(line));
    for (const r of results) expect(r.stats.cases, `${r.adapter} ran cases`).toBeGreaterThan(0);
    expect(results.filter((r) => r.failures.length > 0 || r.crash !== undefined), lines.join('\n')).toEqual([]);
    // Through the store, not around it: every adapter answered from it.
    for (const r of results) expect((r.stats.replies.HIT ?? 0) + (r.stats.replies.STALE ?? 0), `${r.adapter} served from the store`).toBeGreaterThan(0);
    // Every handler run was checked against the requests sent.
    for (const r of results) expect(r.stats.runs.live ?? 0, `${r.adapter} recorded its runs`).toBeGreaterThan(0);
  }, 180_000);
});
