import { describe, expect, it } from 'vitest';
import { defaultCacheKey, isValidHost, sortQuery, userCacheKey, varyKeySuffix } from '../src/http/rules/cache-key.js';
import { requestBypassReason, responseNotStorableReason } from '../src/http/rules/cacheability.js';
import { AbandonedLoad } from '../src/core/cache.js';
import { ResponseCapture } from '../src/http/flow/capture.js';
import { parseVary, storableHeaders } from '../src/http/rules/headers.js';
import { resolveHttpCacheOptions, HTTP_CACHE_DEFAULTS } from '../src/http/options.js';
import { decodeResponse, encodeResponse, ResponseFormatError } from '../src/http/rules/response-format.js';
import { prepareResponse, toServable, varyMatches } from '../src/http/flow/serve.js';
import { createCache, InvalidOptionError, v8Serializer, jsonSerializer } from '../src/index.js';

describe('cache key', () => {
  it('sorts query parameters by name, keeps the order of repeated names, drops empty ones', () => {
    expect(sortQuery('b=2&a=1')).toBe('a=1&b=2');
    expect(sortQuery('a=2&b=1&a=1')).toBe('a=2&a=1&b=1');
    expect(sortQuery('&z&&a=')).toBe('a=&z');
    expect(sortQuery('a=1&b=2')).toBe('a=1&b=2');
    expect(sortQuery('')).toBe('');
    expect(sortQuery('&&')).toBe('');
    expect(defaultCacheKey('GET', '/x?&', { host: 'a' })).toBe('http:["GET","a","/x",""]');
  });

  it('is method + Host header (lower-case) + path + sorted query; HEAD uses the GET key', () => {
    const key = defaultCacheKey('GET', '/p/x?b=2&a=1', { host: 'Shop.Example:8080' });
    expect(key).toBe('http:["GET","shop.example:8080","/p/x","a=1&b=2"]');
    expect(defaultCacheKey('HEAD', '/p/x?a=1&b=2', { host: 'shop.example:8080' })).toBe(key);
    expect(defaultCacheKey('GET', '/p/x', { host: 'a' })).toBe('http:["GET","a","/p/x",""]');
    expect(defaultCacheKey('GET', '/p/x?', { host: 'a' })).toBe('http:["GET","a","/p/x",""]');
  });

  it('never takes the host from X-Forwarded-Host, and gives requests carrying it an entry of their own', () => {
    const plain = defaultCacheKey('GET', '/', { host: 'shop.example' });
    const forged = defaultCacheKey('GET', '/', { host: 'shop.example', 'x-forwarded-host': 'evil.example' });
    expect(forged).toBe('http:["GET","shop.example","/","",["x-forwarded-host","evil.example"]]');
    expect(defaultCacheKey('GET', '/', { host: 'shop.example', 'x-original-url': '/admin' })).not.toBe(plain);
    expect(defaultCacheKey('GET', '/', { host: 'shop.example', forwarded: 'host=evil' })).not.toBe(plain);
  });

  it('keeps the host and the path apart: Host "victim.example/admin" + /settings is not /admin/settings', () => {
    const real = defaultCacheKey('GET', '/admin/settings', { host: 'victim.example' });
    const forged = defaultCacheKey('GET', '/settings', { host: 'victim.example/admin' });
    expect(forged).not.toBe(real);
    // Nor can a part borrow a separator from its neighbour: path vs query, query vs headers.
    expect(defaultCacheKey('GET', '/a?b', { host: 'h' })).not.toBe(defaultCacheKey('GET', '/a%3Fb', { host: 'h' }));
    expect(defaultCacheKey('GET', '/"?x', { host: 'h' })).not.toBe(defaultCacheKey('GET', '/?"x', { host: 'h' }));
    expect(defaultCacheKey('GET', '/?a', { host: 'h', forwarded: 'b' })).not.toBe(defaultCacheKey('GET', '/?a", ["forwarded","b', { host: 'h' }));
  });

  /** A deterministic PRNG (mulberry32), so a failure can be replayed. */
  function random(seed: number): () => number {
    return () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  it('is injective: 30 000 random requests built from separator characters never share a key unless they are the same request', () => {
    const next = random(9);
    // Every character the old or new encodings could use as a separator, plus plain ones.
    const alphabet = ['a', 'B', '/', '?', '&', '=', ' ', '\n', '"', '\\', '[', ']', ',', ':', '~', '%', '.'];
    const text = (max: number) => Array.from({ length: Math.floor(next() * (max + 1)) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
    const seen = new Map<string, string>();
    for (let i = 0; i < 30_000; i++) {
      const method = ['GET', 'HEAD', 'G', 'GET '][Math.floor(next() * 4)]!;
      const host = text(3);
      const url = text(6);
      const headers: Record<string, string> = { host };
      if (next() < 0.3) headers['x-forwarded-host'] = text(2);
      if (next() < 0.2) headers.forwarded = text(2);
      const varyNames = next() < 0.4 ? ['accept-language', 'x-v'].slice(0, 1 + Math.floor(next() * 2)) : [];
      for (const name of varyNames) if (next() < 0.7) headers[name] = text(3);
      const userKey = next() < 0.25 ? text(8) : undefined;
      const base = userKey === undefined ? defaultCacheKey(method, url, headers) : userCacheKey(userKey);
      const key = varyNames.length === 0 ? base : base + varyKeySuffix(varyNames, headers);
      // What makes two requests the same: the normalised parts the key is meant to hold.
      const q = url.indexOf('?');
      const identity = JSON.stringify(
        userKey === undefined
          ? [
              method === 'HEAD' ? 'GET' : method,
              host.toLowerCase(),
              q === -1 ? url : url.slice(0, q),
              q === -1 ? '' : sortQuery(url.slice(q + 1)),
              headers['x-forwarded-host'] ?? null,
              headers.forwarded ?? null,
              varyNames.map((n) => [n, headers[n] ?? null]),
            ]
          : ['user', userKey, varyNames.map((n) => [n, headers[n] ?? null])],
      );
      const before = seen.get(key);
      if (before !== undefined) expect(before).toBe(identity);
      else seen.set(key, identity);
    }
    expect(seen.size).toBeGreaterThan(20_000);
  });

  it('namespaces user keys apart from default keys, escaped so no user key can reach into the Vary part', () => {
    expect(userCacheKey('u1:/me')).toBe('http:~u1:/me');
    const def = defaultCacheKey('GET', '/x', { host: 'h' });
    expect(userCacheKey(def.slice('http:'.length))).not.toBe(def);
    const vary = varyKeySuffix(['accept-language'], { 'accept-language': 'de' });
    expect(vary).toBe('\n[["accept-language","de"]]');
    expect(userCacheKey(`k${vary}`)).not.toBe(userCacheKey('k') + vary);
    expect(userCacheKey('a\\nb')).not.toBe(userCacheKey('a\nb'));
    expect(userCacheKey('a\nb')).not.toContain('\n');
    expect(varyKeySuffix(['accept-encoding', 'accept-language'], { 'accept-encoding': 'gzip' })).toBe(
      '\n[["accept-encoding","gzip"],["accept-language",null]]',
    );
    // An absent header and an empty one are different variants.
    expect(varyKeySuffix(['x'], {})).not.toBe(varyKeySuffix(['x'], { x: '' }));
  });

  it.each([
    ['shop.example', true],
    ['Shop.Example:8080', true],
    ['127.0.0.1:3000', true],
    ['[::1]', true],
    ['[::1]:8080', true],
    ['[2001:db8::7]', true],
    ['[v1.fe80::a+en1]', true],
    ['xn--bcher-kva.example', true],
    ["a-b_c~!$&'()*+,;=.example", true],
    ['%C3%BC.example', true],
    ['', true],
    ['localhost:', true],
    ['victim.example/admin', false],
    ['victim.example?x', false],
    ['victim.example#x', false],
    ['user@victim.example', false],
    ['victim.example:80:80', false],
    ['victim.example:8o', false],
    ['victim example', false],
    ['victim.example\\admin', false],
    ['%zz.example', false],
    ['[::1', false],
    ['[::1]x', false],
    ['[::g]', false],
    ['[1.2.3.4]', false],
    ['::1', false],
  ])('validates Host %j as host[:port] (RFC 9110 §7.2): %s', (host, valid) => {
    expect(isValidHost(host)).toBe(valid);
  });
});

describe('cacheability', () => {
  it('passes through anything but GET/HEAD, private headers, ranges, a malformed Host and a body', () => {
    const p = HTTP_CACHE_DEFAULTS.privateHeaders;
    expect(requestBypassReason('GET', {}, p)).toBeUndefined();
    expect(requestBypassReason('HEAD', {}, p)).toBeUndefined();
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) expect(requestBypassReason(m, {}, p)).toBe('method');
    expect(requestBypassReason('GET', { authorization: 'x' }, p)).toBe('authorization');
    expect(requestBypassReason('GET', { cookie: 'x' }, p)).toBe('cookie');
    expect(requestBypassReason('GET', { authorization: 'x', cookie: 'y' }, [])).toBeUndefined();
    expect(requestBypassReason('GET', { 'x-api-key': 'k' }, p)).toBeUndefined();
    expect(requestBypassReason('GET', { 'x-api-key': 'k' }, ['x-api-key'])).toBe('x-api-key');
    expect(requestBypassReason('POST', { authorization: 'x' }, [])).toBe('method');
    expect(requestBypassReason('GET', { range: 'bytes=0-1' }, [])).toBe('range');
    expect(requestBypassReason('GET', { host: 'victim.example/admin' }, [])).toBe('host');
    expect(requestBypassReason('GET', { ':authority': 'a b' } as never, [])).toBe('host');
    expect(requestBypassReason('GET', { host: 'shop.example:8080' }, [])).toBeUndefined();
    for (const method of ['GET', 'HEAD']) {
      expect(requestBypassReason(method, { 'content-length': '2' }, [])).toBe('body');
      expect(requestBypassReason(method, { 'transfer-encoding': 'chunked' }, [])).toBe('body');
      expect(requestBypassReason(method, { 'transfer-encoding': 'identity' }, [])).toBe('body');
      expect(requestBypassReason(method, { 'content-length': '0' }, [])).toBeUndefined();
    }
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

  it('parses Vary', () => {
    expect(parseVary('Accept-Language, accept-encoding,Accept-Language')).toEqual(['accept-encoding', 'accept-language']);
    expect(parseVary('*')).toBe('*');
    expect(parseVary(undefined)).toEqual([]);
  });

  it('drops hop-by-hop headers, Set-Cookie, Content-Length, X-Cache, Age, Cache-Status, Dogpile-Cache-Control and what Connection names; keeps Date', () => {
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
      'cache-status': 'x; hit',
      'dogpile-cache-control': 'max-age=5',
      etag: '"e"',
      link: ['<a>; rel=preload', '<b>; rel=preload'],
      'x-number': 42,
    });
    expect(stored).toEqual([
      ['content-type', 'text/html'],
      ['date', 'now'],
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

  it("keeps the response's own stale-if-error window with its freshness (0: never stale), and none when it says nothing", () => {
    for (const staleIfError of [60_000, 0]) {
      const decoded = decodeResponse(encodeResponse({ ...response, freshFor: 1000, ageOnArrival: 0, staleIfError }));
      expect([decoded.freshFor, decoded.staleIfError]).toEqual([1000, staleIfError]);
      expect(decoded.body.equals(body)).toBe(true);
    }
    const silent = decodeResponse(encodeResponse({ ...response, freshFor: 1000, ageOnArrival: 0 }));
    expect([silent.freshFor, silent.staleIfError]).toEqual([1000, undefined]);
    const truncated = encodeResponse({ ...response, headers: [], vary: [], body: Buffer.alloc(0), freshFor: 1000, ageOnArrival: 0, staleIfError: 5 });
    expect(() => decodeResponse(truncated.subarray(0, truncated.length - 4))).toThrow(ResponseFormatError);
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
  it('has documented defaults (the literals of the README table, also pinned against it in defaults.test.ts)', () => {
    const o = resolveHttpCacheOptions(undefined);
    expect(o.ttl).toBe(60_000);
    expect(o.maxTtl).toBe(86_400_000);
    expect(o.cacheStatusName).toBe('dogpile-guard');
    expect(o.hitForMissTtl).toBe(5000);
    expect([...o.statuses]).toEqual([200]);
    expect(o.maxBodySize).toBe(1_048_576);
    expect(o.privateHeaders).toEqual(['authorization', 'cookie']);
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

  it('takes privateHeaders as header names, lower-cased; anything else names privateHeaders', () => {
    expect(resolveHttpCacheOptions({ privateHeaders: ['Authorization', 'X-Api-Key', 'x-api-key'] }).privateHeaders).toEqual(['authorization', 'x-api-key']);
    expect(resolveHttpCacheOptions({ privateHeaders: [] }).privateHeaders).toEqual([]);
    for (const bad of ['x-api-key', ['x-api-key', ''], ['x api key'], ['x-api-key:'], [42], [null], null, { 0: 'a' }]) {
      expect(() => resolveHttpCacheOptions({ privateHeaders: bad as never })).toThrow(InvalidOptionError);
      expect(() => resolveHttpCacheOptions({ privateHeaders: bad as never })).toThrow(/Invalid privateHeaders/);
    }
    expect(Object.isFrozen(HTTP_CACHE_DEFAULTS.privateHeaders)).toBe(true);
  });
});
