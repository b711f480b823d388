import { describe, expect, it } from 'vitest';
import { defaultCacheKey, sortQuery, userCacheKey, varyKeySuffix } from '../src/http/cache-key.js';
import { requestBypassReason, responseNotStorableReason } from '../src/http/cacheability.js';
import { AbandonedLoad } from '../src/core/cache.js';
import { ResponseCapture } from '../src/http/capture.js';
import { cacheControlDirectives, etagMatches, parseVary, storableHeaders } from '../src/http/headers.js';
import { resolveHttpCacheOptions, HTTP_CACHE_DEFAULTS } from '../src/http/options.js';
import { decodeResponse, encodeResponse, ResponseFormatError } from '../src/http/response-format.js';
import { prepareResponse, toServable, varyMatches } from '../src/http/serve.js';
import { createCache, v8Serializer, jsonSerializer } from '../src/index.js';

describe('cache key', () => {
  it('sorts query parameters by name, keeps the order of repeated names, drops empty ones', () => {
    expect(sortQuery('b=2&a=1')).toBe('a=1&b=2');
    expect(sortQuery('a=2&b=1&a=1')).toBe('a=2&a=1&b=1');
    expect(sortQuery('&z&&a=')).toBe('a=&z');
    expect(sortQuery('a=1&b=2')).toBe('a=1&b=2');
    expect(sortQuery('')).toBe('');
    expect(sortQuery('&&')).toBe('');
    expect(defaultCacheKey('GET', '/x?&', { host: 'a' })).toBe('http:GET a/x');
  });

  it('is method + Host header (lower-case) + path + sorted query; HEAD uses the GET key', () => {
    const key = defaultCacheKey('GET', '/p/x?b=2&a=1', { host: 'Shop.Example:8080' });
    expect(key).toBe('http:GET shop.example:8080/p/x?a=1&b=2');
    expect(defaultCacheKey('HEAD', '/p/x?a=1&b=2', { host: 'shop.example:8080' })).toBe(key);
    expect(defaultCacheKey('GET', '/p/x', { host: 'a' })).toBe('http:GET a/p/x');
    expect(defaultCacheKey('GET', '/p/x?', { host: 'a' })).toBe('http:GET a/p/x');
  });

  it('never takes the host from X-Forwarded-Host, and gives requests carrying it an entry of their own', () => {
    const plain = defaultCacheKey('GET', '/', { host: 'shop.example' });
    const forged = defaultCacheKey('GET', '/', { host: 'shop.example', 'x-forwarded-host': 'evil.example' });
    expect(forged.startsWith(`${plain}\n`)).toBe(true);
    expect(forged).toContain('x-forwarded-host: evil.example');
    expect(defaultCacheKey('GET', '/', { host: 'shop.example', 'x-original-url': '/admin' })).not.toBe(plain);
    expect(defaultCacheKey('GET', '/', { host: 'shop.example', forwarded: 'host=evil' })).not.toBe(plain);
  });

  it('namespaces user keys and adds Vary values', () => {
    expect(userCacheKey('u1:/me')).toBe('http:~u1:/me');
    expect(varyKeySuffix(['accept-encoding', 'accept-language'], { 'accept-encoding': 'gzip' })).toBe(
      '\nvary accept-encoding: gzip\nvary accept-language',
    );
  });
});

describe('cacheability', () => {
  it('passes through anything but GET/HEAD, credentials (unless keyed) and ranges', () => {
    expect(requestBypassReason('GET', {}, false)).toBeUndefined();
    expect(requestBypassReason('HEAD', {}, false)).toBeUndefined();
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) expect(requestBypassReason(m, {}, false)).toBe('method');
    expect(requestBypassReason('GET', { authorization: 'x' }, false)).toBe('authorization');
    expect(requestBypassReason('GET', { cookie: 'x' }, false)).toBe('cookie');
    expect(requestBypassReason('GET', { authorization: 'x', cookie: 'y' }, true)).toBeUndefined();
    expect(requestBypassReason('POST', { authorization: 'x' }, true)).toBe('method');
    expect(requestBypassReason('GET', { range: 'bytes=0-1' }, true)).toBe('range');
  });

  it('stores only allowed statuses without Set-Cookie, private/no-store/no-cache, Vary: * or an oversized body', () => {
    const ok = new Set([200]);
    const facts = (status: number, headers: Record<string, string | string[]> = {}, tooBig = false) => ({ status, headers, tooBig });
    expect(responseNotStorableReason(facts(200), ok)).toBeUndefined();
    expect(responseNotStorableReason(facts(200, { 'cache-control': 'public, max-age=60' }), ok)).toBeUndefined();
    expect(responseNotStorableReason(facts(500), ok)).toBe('status 500');
    expect(responseNotStorableReason(facts(404), new Set([200, 404]))).toBeUndefined();
    expect(responseNotStorableReason(facts(200, { 'set-cookie': ['a=1'] }), ok)).toBe('set-cookie');
    expect(responseNotStorableReason(facts(200, { 'cache-control': 'max-age=5, Private' }), ok)).toBe('cache-control: private');
    expect(responseNotStorableReason(facts(200, { 'cache-control': 'private="x-user"' }), ok)).toBe('cache-control: private');
    expect(responseNotStorableReason(facts(200, { 'cache-control': 'no-store' }), ok)).toBe('cache-control: no-store');
    expect(responseNotStorableReason(facts(200, { 'cache-control': 'no-cache' }), ok)).toBe('cache-control: no-cache');
    expect(responseNotStorableReason(facts(200, { vary: 'Accept, *' }), ok)).toBe('vary: *');
    expect(responseNotStorableReason(facts(200, {}, true), ok)).toBe('body over maxBodySize');
  });

  it('parses Cache-Control, Vary and If-None-Match', () => {
    expect([...cacheControlDirectives(' Public , max-age=3, no-cache="set-cookie"')]).toEqual(['public', 'max-age', 'no-cache']);
    expect(parseVary('Accept-Language, accept-encoding,Accept-Language')).toEqual(['accept-encoding', 'accept-language']);
    expect(parseVary('*')).toBe('*');
    expect(parseVary(undefined)).toEqual([]);
    expect(etagMatches('W/"a", "b"', '"b"')).toBe(true);
    expect(etagMatches('"a"', 'W/"a"')).toBe(true);
    expect(etagMatches('*', '"x"')).toBe(true);
    expect(etagMatches('"a"', '"b"')).toBe(false);
  });

  it('drops hop-by-hop headers, Set-Cookie, Date, Content-Length, X-Cache, Age and what Connection names', () => {
    const stored = storableHeaders({
      'content-type': 'text/html',
      connection: 'keep-alive, x-hop',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'x-hop': '1',
      'set-cookie': ['a=1'],
      date: 'now',
      'content-length': 12,
      'x-cache': 'MISS',
      age: '3',
      etag: '"e"',
      link: ['<a>; rel=preload', '<b>; rel=preload'],
      'x-number': 42,
    });
    expect(stored).toEqual([
      ['content-type', 'text/html'],
      ['etag', '"e"'],
      ['link', ['<a>; rel=preload', '<b>; rel=preload']],
      ['x-number', '42'],
    ]);
  });
});

describe('stored response format', () => {
  const body = Buffer.from(Array.from({ length: 1024 }, (_, i) => (i * 7) % 256));
  const response = {
    createdAt: 1_700_000_000_123.5,
    status: 203,
    headers: [
      ['content-type', 'application/octet-stream'],
      ['x-latin1', 'caf\u00e9 \u00ff'],
      ['link', ['<a>', '<b>']],
    ] as [string, string | string[]][],
    vary: [
      ['accept-language', 'de'],
      ['x-absent', undefined],
    ] as [string, string | undefined][],
    body: [body.subarray(0, 100), body.subarray(100)],
  };

  it('round-trips status, headers, vary values and the body bytes exactly, with no base64', () => {
    const bytes = encodeResponse(response);
    const headerBytes = bytes.length - body.length;
    expect(headerBytes).toBeLessThan(200);
    const decoded = decodeResponse(bytes);
    expect(decoded.createdAt).toBe(response.createdAt);
    expect(decoded.status).toBe(203);
    expect(decoded.headers).toEqual(response.headers);
    expect(decoded.vary).toEqual(response.vary);
    expect(decoded.body.equals(body)).toBe(true);
  });

  it('survives the v8 serializer and a JSON serializer', () => {
    const bytes = encodeResponse(response);
    const viaV8 = toServable(v8Serializer.deserialize(Buffer.from(v8Serializer.serialize(bytes))));
    const viaJson = toServable(jsonSerializer.deserialize(Buffer.from(jsonSerializer.serialize(bytes))));
    for (const s of [viaV8, viaJson]) {
      expect(s?.body.equals(body)).toBe(true);
      expect(s?.headerObject['content-length']).toBe('1024');
    }
  });

  it('rejects foreign and truncated bytes', () => {
    expect(() => decodeResponse(Buffer.from('hello world, not a response'))).toThrow(ResponseFormatError);
    const bytes = encodeResponse(response);
    expect(() => decodeResponse(bytes.subarray(0, 30))).toThrow(ResponseFormatError);
    expect(toServable('a string')).toBeUndefined();
    expect(toServable({ not: 'a buffer' })).toBeUndefined();
    expect(toServable(Buffer.from('nope'))).toBeUndefined();
  });

  it('prepares a 200 with Age, or a 304 for a matching If-None-Match', () => {
    const stored = toServable(
      encodeResponse({ createdAt: 10_000, status: 200, headers: [['etag', '"v1"'], ['content-type', 'text/plain'], ['cache-control', 'max-age=60']], vary: [], body: Buffer.from('hi') }),
    )!;
    const full = prepareResponse(stored, {}, 'HIT', 13_500);
    expect(full).toMatchObject({ status: 200, age: 3, xCache: 'HIT' });
    expect(full.body?.toString()).toBe('hi');
    expect(full.headerObject).toEqual({ etag: '"v1"', 'content-type': 'text/plain', 'cache-control': 'max-age=60', 'content-length': '2' });
    const notModified = prepareResponse(stored, { 'if-none-match': 'W/"v1"' }, 'COALESCED', 10_000);
    expect(notModified).toMatchObject({ status: 304, age: 0, xCache: 'COALESCED', body: undefined });
    expect(notModified.headerObject).toEqual({ etag: '"v1"', 'cache-control': 'max-age=60' });
  });

  it('matches Vary values recorded from the request that produced the response', () => {
    const stored = toServable(encodeResponse({ createdAt: 0, status: 200, headers: [], vary: [['accept-language', 'de'], ['x-a', undefined]], body: Buffer.alloc(0) }))!;
    expect(varyMatches(stored, { 'accept-language': 'de' })).toBe(true);
    expect(varyMatches(stored, { 'accept-language': 'en' })).toBe(false);
    expect(varyMatches(stored, { 'accept-language': 'de', 'x-a': '1' })).toBe(false);
  });
});

describe('response capture', () => {
  const finish = (r: { status: number; tooBig: boolean; body: Buffer[] }) => (r.tooBig ? null : Buffer.concat(r.body));

  it('collects strings, Buffers and typed arrays, and settles once', async () => {
    const capture = new ResponseCapture(100, finish);
    capture.push('hé', 'utf8');
    capture.push(Buffer.from([1, 2]));
    capture.push(new Uint8Array([3]));
    capture.complete(200, {});
    capture.abandon();
    expect(await capture.promise).toEqual(Buffer.concat([Buffer.from('hé'), Buffer.from([1, 2, 3])]));
  });

  it('stops collecting past the size limit', async () => {
    const capture = new ResponseCapture(4, finish);
    capture.push('abc');
    capture.push('de');
    capture.complete(200, {});
    expect(await capture.promise).toBeNull();
  });

  it('keeps capturing after the client left, and shares the complete response', async () => {
    const capture = new ResponseCapture(100, finish);
    capture.push('before ');
    capture.clientGone();
    capture.push('after');
    capture.complete(200, {});
    expect((await capture.promise)?.toString()).toBe('before after');
  });

  it('abandons a response that fails after the client left, or that does not end in time', async () => {
    const failed = new ResponseCapture(100, finish);
    failed.clientGone();
    failed.complete(500, {});
    await expect(failed.promise).rejects.toBeInstanceOf(AbandonedLoad);
    const late = new ResponseCapture(100, finish, undefined, 30);
    late.push('partial');
    late.clientGone();
    await expect(late.promise).rejects.toBeInstanceOf(AbandonedLoad);
    // With the client there, a 500 is an answer like any other (the guard's finish() refuses to share it).
    const answered = new ResponseCapture(100, finish, undefined, 30);
    answered.complete(500, {});
    expect(await answered.promise).toEqual(Buffer.alloc(0));
  });
});

describe('options', () => {
  it('has documented defaults', () => {
    const o = resolveHttpCacheOptions(undefined);
    expect(o.ttl).toBe(HTTP_CACHE_DEFAULTS.ttl);
    expect([...o.statuses]).toEqual([200]);
    expect(o.maxBodySize).toBe(1_048_576);
    expect(o.cache).toBeUndefined();
  });

  it('accepts a cache and durations as strings', async () => {
    const cache = createCache();
    const o = resolveHttpCacheOptions({ cache, ttl: '5m', statuses: [200, 301], maxBodySize: 0 });
    expect(o.ttl).toBe(300_000);
    expect(o.cache).toBe(cache);
    expect(o.maxBodySize).toBe(0);
    await cache.close();
  });

  it('names the bad option', () => {
    expect(() => resolveHttpCacheOptions({ ttl: Number.NaN })).toThrow(/Invalid ttl/);
    expect(() => resolveHttpCacheOptions({ maxBodySize: 1.5 })).toThrow(/Invalid maxBodySize/);
    expect(() => resolveHttpCacheOptions('x' as never)).toThrow(/Invalid options/);
    expect(() => resolveHttpCacheOptions({ prefix: '/x' } as never)).toThrow(/Invalid prefix: unknown option/);
    expect(() => resolveHttpCacheOptions({ prefix: '/x' } as never, { extra: ['prefix'] })).not.toThrow();
  });
});
