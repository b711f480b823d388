import { describe, expect, it } from 'vitest';
import { MAX_DELTA_SECONDS, parseCacheControl, parseTargetedField, selectCacheDirectives } from '../src/http/rules/cache-control.js';
import { formatHttpDate, parseHttpDate } from '../src/http/rules/http-date.js';
import { currentAge, HEURISTICALLY_CACHEABLE, initialAgeOf, parseAge, responseFreshness, type FreshnessOptions } from '../src/http/rules/freshness.js';
import type { HeaderBag } from '../src/http/rules/header-bag.js';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const date = (offsetSeconds: number) => formatHttpDate(NOW + offsetSeconds * 1000);
const OPTS: FreshnessOptions = { now: NOW, defaultTtl: 30_000, maxTtl: 86_400_000, statuses: [200] };
const fresh = (headers: HeaderBag, status = 200, opts: Partial<FreshnessOptions> = {}) => responseFreshness(status, headers, { ...OPTS, ...opts });
const ttlOf = (headers: HeaderBag, status = 200, opts: Partial<FreshnessOptions> = {}) => {
  const f = fresh(headers, status, opts);
  return f.storable ? f.ttl : f.reason;
};

describe('HTTP-date (RFC 9110 §5.6.7)', () => {
  it('reads IMF-fixdate, RFC 850 and asctime, all as GMT', () => {
    const t = Date.UTC(1994, 10, 6, 8, 49, 37);
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(t);
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(t);
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(t);
    expect(parseHttpDate('sun, 06 nov 1994 08:49:37 gmt')).toBe(t);
  });
  it('rejects what is not an HTTP-date', () => {
    for (const v of ['0', '-1', '', 'yesterday', '2026-01-01T00:00:00Z', 'Sun, 06 Nov 1994 08:49:37 PST', 'Mon, 31 Feb 2026 00:00:00 GMT', 'Sun, 06 Nov 1994 25:00:00 GMT']) {
      expect(parseHttpDate(v), v).toBeUndefined();
    }
    expect(parseHttpDate(undefined)).toBeUndefined();
  });
  it('formats IMF-fixdate', () => {
    expect(formatHttpDate(Date.UTC(1994, 10, 6, 8, 49, 37))).toBe('Sun, 06 Nov 1994 08:49:37 GMT');
  });
});

describe('Cache-Control parsing (RFC 9111 §5.2)', () => {
  it('§5.2: directive names are case-insensitive', () => {
    const cc = parseCacheControl('Max-Age=60, NO-STORE, Private');
    expect(cc.seconds('max-age')).toBe(60);
    expect(cc.has('no-store')).toBe(true);
    expect(cc.names()).toEqual(['max-age', 'no-store', 'private']);
  });
  it('§5.2: the quoted form of an argument is accepted', () => {
    expect(parseCacheControl('max-age="3600"').seconds('max-age')).toBe(3600);
  });
  it('§1.2.2: delta-seconds with leading zeros is valid', () => {
    expect(parseCacheControl('max-age=0003600').seconds('max-age')).toBe(3600);
    expect(parseCacheControl('max-age=000').seconds('max-age')).toBe(0);
  });
  it('§1.2.2: a delta-seconds beyond 2^31 is taken as 2^31', () => {
    expect(parseCacheControl('max-age=99999999999999999999').seconds('max-age')).toBe(MAX_DELTA_SECONDS);
    expect(parseCacheControl('max-age=2147483649').seconds('max-age')).toBe(2 ** 31);
    expect(parseCacheControl('max-age=2147483647').seconds('max-age')).toBe(2 ** 31 - 1);
  });
  it('§4.2.1: a non-integer, signed, negative or missing argument is invalid', () => {
    for (const v of ['max-age=+60', 'max-age=-1', 'max-age=1.5', 'max-age=abc', 'max-age', 'max-age=', 'max-age=6 0', 'max-age="60"x', "max-age='60'", 'max-age=a100', 'max-age=100a', 'max-age=3600.0']) {
      expect(parseCacheControl(v).seconds('max-age'), v).toBe('invalid');
    }
    expect(parseCacheControl('public').seconds('max-age')).toBeUndefined();
  });
  it('§5.2: whitespace around "=" is not in the grammar: the argument is invalid', () => {
    expect(parseCacheControl('max-age =100').seconds('max-age')).toBe('invalid');
    expect(parseCacheControl('max-age= 100').seconds('max-age')).toBe('invalid');
    expect(parseCacheControl('max-age=100 ').seconds('max-age')).toBe(100);
    expect(parseCacheControl(' max-age=100 , public').seconds('max-age')).toBe(100);
  });
  it('§5.2: "max-age" inside a quoted argument of another directive is not a directive', () => {
    expect(parseCacheControl('extension="max-age=100", max-age=1').seconds('max-age')).toBe(1);
    expect(parseCacheControl('max-age="1", extension="max-age=100"').seconds('max-age')).toBe(1);
    expect(parseCacheControl('extension="a, max-age=100"').has('max-age')).toBe(false);
  });
  it('§4.2.1: duplicates with the same value are fine, with different values invalid (the response is stale)', () => {
    expect(parseCacheControl('max-age=60, max-age=60').seconds('max-age')).toBe(60);
    expect(parseCacheControl('max-age=1, max-age=3600').seconds('max-age')).toBe('invalid');
    expect(parseCacheControl('max-age=3600, max-age=1').seconds('max-age')).toBe('invalid');
  });
  it('§5.2: the field over several header lines is one list', () => {
    const cc = parseCacheControl(['max-age=60', 'must-revalidate', 'max-age=60']);
    expect(cc.seconds('max-age')).toBe(60);
    expect(cc.has('must-revalidate')).toBe(true);
    expect(parseCacheControl(['max-age=60', 'max-age=5']).seconds('max-age')).toBe('invalid');
  });
  it('§5.2: quoted arguments may contain commas and escapes; empty members are skipped', () => {
    const cc = parseCacheControl(',, no-cache="Set-Cookie, X-Foo" ,private="a\\"b", ,max-age=5');
    expect(cc.fieldNames('no-cache')).toEqual(['set-cookie', 'x-foo']);
    expect(cc.values('private')).toEqual(['a"b']);
    expect(cc.seconds('max-age')).toBe(5);
  });
  it('§5.2.2.4 and §5.2.2.7: bare no-cache/private win over qualified ones; qualified lists are merged', () => {
    expect(parseCacheControl('no-cache="a", no-cache').fieldNames('no-cache')).toBe(true);
    expect(parseCacheControl('no-cache').fieldNames('no-cache')).toBe(true);
    expect(parseCacheControl('no-cache=""').fieldNames('no-cache')).toBe(true);
    expect(parseCacheControl('private="a", private="B, c"').fieldNames('private')).toEqual(['a', 'b', 'c']);
    expect(parseCacheControl('max-age=5').fieldNames('private')).toBeUndefined();
  });
  it('reads an absent or empty field as no directive', () => {
    expect(parseCacheControl(undefined).names()).toEqual([]);
    expect(parseCacheControl('').names()).toEqual([]);
    expect(parseCacheControl([]).names()).toEqual([]);
  });
});

describe('targeted fields (RFC 9213)', () => {
  it('§2.1: a targeted field is a Structured Fields Dictionary', () => {
    const d = parseTargetedField('max-age=60, private, no-cache="a, b", stale-if-error=30;x=1')!;
    expect(d.seconds('max-age')).toBe(60);
    expect(d.fieldNames('private')).toBe(true);
    expect(d.fieldNames('no-cache')).toEqual(['a', 'b']);
    expect(d.seconds('stale-if-error')).toBe(30);
    expect(parseTargetedField('no-cache=("a" b)')!.fieldNames('no-cache')).toEqual(['a', 'b']);
    expect(parseTargetedField('no-store=?0, max-age=5')!.has('no-store')).toBe(false);
    expect(parseTargetedField('no-store=?1')!.has('no-store')).toBe(true);
    expect(parseTargetedField(['max-age=5', 'must-revalidate'])!.has('must-revalidate')).toBe(true);
  });
  it('§2.1: a known directive with a value of the wrong type makes the whole field invalid', () => {
    for (const v of ['max-age=-5', 'max-age=1.5', 'max-age="60"', 'max-age=abc', 's-maxage=?1', 'stale-if-error="5"', 'no-store=1', 'private=5', 'max-age=5, must-revalidate="x"']) {
      expect(parseTargetedField(v), v).toBeUndefined();
    }
    expect(parseTargetedField('foobar="x", max-age=3600')!.seconds('max-age')).toBe(3600);
    expect(parseTargetedField('max-age=0003600')!.seconds('max-age')).toBe(3600);
    expect(parseTargetedField('max-age=99999999999')!.seconds('max-age')).toBe(2 ** 31);
  });
  it('§2.1: a targeted field of the wrong type falls back to Cache-Control (cache-tests cdn-cc-invalid-sh-type-wrong)', () => {
    expect(fresh({ 'cdn-cache-control': 'max-age="10000"', 'cache-control': 'no-store' })).toEqual({ storable: false, reason: 'cache-control: no-store' });
    expect(fresh({ 'cdn-cache-control': 'max-age=10000, &&&&&', 'cache-control': 'no-store' })).toMatchObject({ storable: false });
  });
  it('§2.1: a field that is empty or fails to parse is ignored', () => {
    for (const v of ['', 'Max-Age=60', 'max-age = 60', 'max-age=60,', 'max-age="60', 'max-age=60 private', '"x"', 'a=@1']) {
      expect(parseTargetedField(v), v).toBeUndefined();
    }
  });
  it('§2.2: Dogpile-Cache-Control, then CDN-Cache-Control, then Cache-Control', () => {
    const all = { 'cache-control': 'max-age=1', 'cdn-cache-control': 'max-age=2', 'dogpile-cache-control': 'max-age=3' };
    expect(selectCacheDirectives(all).source).toBe('dogpile-cache-control');
    expect(selectCacheDirectives(all).directives.seconds('max-age')).toBe(3);
    const { 'dogpile-cache-control': _d, ...twoFields } = all;
    expect(selectCacheDirectives(twoFields).source).toBe('cdn-cache-control');
    expect(selectCacheDirectives({ ...all, 'dogpile-cache-control': 'Max-Age=3' }).source).toBe('cdn-cache-control');
    expect(selectCacheDirectives({ ...all, 'dogpile-cache-control': '', 'cdn-cache-control': 'bad value' }).source).toBe('cache-control');
    expect(selectCacheDirectives({ 'CDN-Cache-Control': 'no-store' }).directives.has('no-store')).toBe(true);
  });
  it('§2.2: a valid targeted field replaces Cache-Control and Expires entirely', () => {
    expect(ttlOf({ 'cache-control': 'no-store', 'cdn-cache-control': 'max-age=60' })).toBe(60_000);
    expect(ttlOf({ 'cache-control': 'max-age=600', 'cdn-cache-control': 'no-store' })).toBe('cdn-cache-control: no-store');
    expect(ttlOf({ 'cache-control': 'max-age=600', 'dogpile-cache-control': 'private' })).toBe('dogpile-cache-control: private');
    // Expires is not read when a targeted field applies: without a lifetime in it, defaultTtl.
    const f = fresh({ expires: date(600), date: date(0), 'cdn-cache-control': 'must-revalidate' });
    expect(f).toMatchObject({ storable: true, ttl: 30_000, explicit: false, mustRevalidate: true });
    // Pragma likewise.
    expect(fresh({ pragma: 'no-cache', 'cdn-cache-control': 'max-age=60' })).toMatchObject({ storable: true, ttl: 60_000, mustRevalidate: false });
  });
  it('§2.1: an invalid targeted field falls back to Cache-Control', () => {
    expect(ttlOf({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'max-age=5;' })).toBe(60_000);
  });
});

describe('freshness lifetime (RFC 9111 §4.2.1)', () => {
  it('§5.2.2.10: s-maxage takes precedence over max-age and Expires for a shared cache', () => {
    expect(ttlOf({ 'cache-control': 'max-age=600, s-maxage=60', expires: date(900), date: date(0) })).toBe(60_000);
    expect(ttlOf({ 'cache-control': 's-maxage=0, max-age=600' })).toBe(0);
  });
  it('§5.2.2.1: max-age takes precedence over Expires', () => {
    expect(ttlOf({ 'cache-control': 'max-age=60', expires: date(900), date: date(0) })).toBe(60_000);
    expect(ttlOf({ 'cache-control': 'max-age=60', expires: '0' })).toBe(60_000);
  });
  it('§5.3: Expires − Date', () => {
    expect(ttlOf({ expires: date(120), date: date(0) })).toBe(120_000);
    // Expires − Date = 180 s, minus an apparent age of 60 s: fresh until the Expires instant.
    expect(ttlOf({ expires: date(120), date: date(-60) })).toBe(120_000);
    expect(ttlOf({ expires: date(120), date: date(60) })).toBe(60_000); // Date ahead of the clock: no apparent age
  });
  it('§5.3: Expires without Date counts from the response time', () => {
    expect(ttlOf({ expires: date(90) })).toBe(90_000);
    // Received 10 s ago: lifetime 100 s from then, 90 s left now.
    expect(ttlOf({ expires: date(90) }, 200, { responseTime: NOW - 10_000 })).toBe(90_000);
  });
  it('§5.3: an invalid Expires ("0", garbage) means already expired', () => {
    for (const e of ['0', '-1', 'never', '']) {
      expect(fresh({ expires: e }), e).toMatchObject({ storable: true, ttl: 0, explicit: true });
    }
    expect(fresh({ expires: [date(60), date(120)] })).toMatchObject({ ttl: 0, explicit: true });
    expect(ttlOf({ expires: [date(60), date(60)], date: date(0) })).toBe(60_000);
  });
  it('§5.3: a past Expires is stale at once', () => {
    expect(fresh({ expires: date(-60), date: date(0) })).toMatchObject({ storable: true, ttl: 0, explicit: true, mustRevalidate: false });
  });
  it('§4.2.1: max-age=0, a negative max-age, an invalid max-age are stale at once (not reused without revalidation)', () => {
    for (const cc of ['max-age=0', 'max-age=-1', 'max-age=abc', 'max-age=+5', 'max-age=5, max-age=6', 'max-age']) {
      expect(fresh({ 'cache-control': cc }), cc).toMatchObject({ storable: true, ttl: 0, explicit: true });
    }
    expect(fresh({ 'cache-control': 's-maxage=x, max-age=600' })).toMatchObject({ ttl: 0 });
  });
  it('§4.2.1: a quoted, zero-padded or huge max-age', () => {
    expect(ttlOf({ 'cache-control': 'max-age="60"' })).toBe(60_000);
    expect(ttlOf({ 'cache-control': 'max-age=00060' })).toBe(60_000);
    expect(ttlOf({ 'cache-control': 'max-age=99999999999999999999' }, 200, { maxTtl: Infinity })).toBe(2 ** 31 * 1000);
  });
  it('§4.2.1: directive names in any case', () => {
    expect(ttlOf({ 'cache-control': 'MAX-AGE=60' })).toBe(60_000);
    expect(ttlOf({ 'Cache-Control': 'max-age=60' })).toBe(60_000);
  });
  it('§5.2: Cache-Control over several header lines', () => {
    expect(fresh({ 'cache-control': ['max-age=60', 'must-revalidate'] })).toMatchObject({ ttl: 60_000, mustRevalidate: true });
    expect(fresh({ 'cache-control': ['max-age=60', 'no-store'] })).toMatchObject({ storable: false });
  });
  it('no lifetime in the response: defaultTtl (Varnish default_ttl); 0 stores only explicit freshness', () => {
    expect(fresh({})).toMatchObject({ storable: true, ttl: 30_000, explicit: false });
    expect(fresh({ 'cache-control': 'public' })).toMatchObject({ storable: true, ttl: 30_000, explicit: false });
    expect(fresh({}, 200, { defaultTtl: 0 })).toEqual({ storable: false, reason: 'no explicit freshness' });
    expect(fresh({ 'cache-control': 'max-age=60' }, 200, { defaultTtl: 0 })).toMatchObject({ storable: true, ttl: 60_000, explicit: true });
  });
  it('maxTtl caps the remaining lifetime', () => {
    expect(ttlOf({ 'cache-control': 'max-age=3600' }, 200, { maxTtl: 600_000 })).toBe(600_000);
    expect(ttlOf({}, 200, { maxTtl: 10_000 })).toBe(10_000);
    expect(ttlOf({ 'cache-control': 'max-age=3600', age: '3000' }, 200, { maxTtl: 1_200_000 })).toBe(600_000);
  });
});

describe('age (RFC 9111 §4.2.3, §5.1)', () => {
  it('§4.2.3: the Age a response arrives with is subtracted from its lifetime', () => {
    expect(ttlOf({ 'cache-control': 'max-age=60', age: '20' })).toBe(40_000);
    expect(ttlOf({ 'cache-control': 'max-age=60', age: '90' })).toBe(0);
    expect(ttlOf({ age: '10' })).toBe(20_000);
  });
  it('§4.2.3: the time since the response time counts too', () => {
    expect(ttlOf({ 'cache-control': 'max-age=60' }, 200, { responseTime: NOW - 15_000 })).toBe(45_000);
  });
  it('§4.2.3: the apparent age (response time − Date) counts when larger than Age', () => {
    expect(initialAgeOf({ date: date(-30) }, NOW)).toBe(30);
    expect(initialAgeOf({ date: date(-30), age: '50' }, NOW)).toBe(50);
    expect(initialAgeOf({ date: date(30) }, NOW)).toBe(0);
    expect(initialAgeOf({ date: date(0) }, NOW + 900)).toBe(0); // Date has whole seconds
    expect(ttlOf({ 'cache-control': 'max-age=60', date: date(-30) })).toBe(30_000);
  });
  it('§5.1: an invalid Age is ignored; of a list the first member is used', () => {
    for (const a of ['abc', '-5', '1.5', '+5', '']) expect(parseAge({ age: a }), a).toBeUndefined();
    expect(parseAge({ age: '10, 20' })).toBe(10);
    expect(parseAge({ age: ['7', '8'] })).toBe(7);
    expect(parseAge({ age: '0010' })).toBe(10);
    expect(parseAge({ age: '99999999999999' })).toBe(2 ** 31);
    expect(ttlOf({ 'cache-control': 'max-age=60', age: 'abc' })).toBe(60_000);
  });
  it('§4.2.3: currentAge = age on arrival + whole seconds resident, never negative', () => {
    expect(currentAge(NOW, 0, NOW)).toBe(0);
    expect(currentAge(NOW, 0, NOW + 1999)).toBe(1);
    expect(currentAge(NOW, 20, NOW + 5000)).toBe(25);
    expect(currentAge(NOW, 0, NOW - 5000)).toBe(0);
    expect(currentAge(NOW, Number.NaN, NOW + 1000)).toBe(1);
    expect(currentAge(NOW, 2 ** 31, NOW + 10_000)).toBe(2 ** 31);
  });
});

describe('storability (RFC 9111 §3)', () => {
  it('§3: a 206 is never stored, whatever it says', () => {
    expect(fresh({ 'cache-control': 'max-age=60' }, 206)).toEqual({ storable: false, reason: 'status 206' });
    expect(fresh({}, 206, { statuses: [200, 206] })).toEqual({ storable: false, reason: 'status 206' });
  });
  it('RFC 9110 §15.1: explicit freshness makes every heuristically cacheable status storable', () => {
    for (const status of HEURISTICALLY_CACHEABLE) {
      expect(fresh({ 'cache-control': 'max-age=60' }, status), String(status)).toMatchObject({ storable: true, ttl: 60_000 });
      expect(fresh({ expires: date(60), date: date(0) }, status), String(status)).toMatchObject({ storable: true, ttl: 60_000 });
    }
    expect([...HEURISTICALLY_CACHEABLE].sort((a, b) => a - b)).toEqual([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]);
  });
  it('statuses governs responses that rely on defaultTtl', () => {
    expect(fresh({}, 404)).toEqual({ storable: false, reason: 'status 404' });
    expect(fresh({}, 404, { statuses: new Set([200, 404]) })).toMatchObject({ storable: true, ttl: 30_000 });
  });
  it('RFC 9111 §3: explicit freshness makes any final status storable; a 304 never is', () => {
    for (const status of [201, 302, 307, 400, 403, 500, 503, 599]) {
      expect(fresh({ 'cache-control': 'max-age=60' }, status), String(status)).toMatchObject({ storable: true, ttl: 60_000, explicit: true });
      expect(fresh({ 'cache-control': 's-maxage=60' }, status), String(status)).toMatchObject({ storable: true, ttl: 60_000 });
      expect(fresh({ expires: date(60), date: date(0) }, status), String(status)).toMatchObject({ storable: true, ttl: 60_000 });
      expect(fresh({}, status)).toEqual({ storable: false, reason: `status ${status}` });
    }
    expect(fresh({ 'cache-control': 'max-age=60' }, 304)).toEqual({ storable: false, reason: 'status 304' });
  });
  it('RFC 9111 §3: `public` lets any final status be stored for the default lifetime, and only with one', () => {
    expect(fresh({ 'cache-control': 'public' }, 500)).toMatchObject({ storable: true, ttl: 30_000, explicit: false });
    expect(fresh({ 'cache-control': 'public' }, 302)).toMatchObject({ storable: true, ttl: 30_000 });
    expect(fresh({ 'cache-control': 'public' }, 500, { defaultTtl: 0 })).toEqual({ storable: false, reason: 'status 500' });
    expect(fresh({ 'cache-control': 'public, no-store' }, 500)).toEqual({ storable: false, reason: 'cache-control: no-store' });
  });
  it('§5.2.2.5: no-store', () => {
    expect(fresh({ 'cache-control': 'max-age=60, no-store' })).toEqual({ storable: false, reason: 'cache-control: no-store' });
    expect(fresh({ 'cache-control': 'No-Store' })).toMatchObject({ storable: false });
  });
  it('§5.2.2.7: bare private is not stored; private="field" stores the rest without the field', () => {
    expect(fresh({ 'cache-control': 'private, max-age=60' })).toEqual({ storable: false, reason: 'cache-control: private' });
    expect(fresh({ 'cache-control': 'private="X-User", max-age=60' })).toMatchObject({ storable: true, ttl: 60_000, omitHeaders: ['x-user'] });
  });
  it('Set-Cookie and Vary: * are not stored', () => {
    expect(fresh({ 'cache-control': 'max-age=60', 'set-cookie': ['a=1'] })).toEqual({ storable: false, reason: 'set-cookie' });
    expect(fresh({ vary: 'Accept, *' })).toEqual({ storable: false, reason: 'vary: *' });
    expect(fresh({ vary: ['accept', '*'] })).toEqual({ storable: false, reason: 'vary: *' });
    expect(fresh({ vary: 'accept' })).toMatchObject({ storable: true });
  });
  it('§5.2.2.4: bare no-cache is stored only with a validator, then never reused without revalidation', () => {
    expect(fresh({ 'cache-control': 'no-cache, max-age=600' })).toEqual({ storable: false, reason: 'cache-control: no-cache' });
    expect(fresh({ 'cache-control': 'no-cache, max-age=600, stale-while-revalidate=60', etag: '"v1"' })).toEqual({
      storable: true,
      ttl: 0,
      explicit: true,
      mustRevalidate: true,
      omitHeaders: [],
      initialAge: 0,
      source: 'cache-control',
    });
    expect(fresh({ 'cache-control': 'no-cache', 'last-modified': date(-3600) })).toMatchObject({ storable: true, ttl: 0, mustRevalidate: true });
    expect(fresh({ 'cache-control': 'no-cache', 'last-modified': 'garbage' })).toMatchObject({ storable: false });
    expect(fresh({ 'cache-control': 'no-cache="a", no-cache', etag: '"v"' })).toMatchObject({ ttl: 0, mustRevalidate: true });
  });
  it('§5.2.2.4: no-cache="field" is reused without revalidation, without the field', () => {
    expect(fresh({ 'cache-control': 'no-cache="Set-Cookie2, X-Token", max-age=60' })).toMatchObject({
      storable: true,
      ttl: 60_000,
      mustRevalidate: false,
      omitHeaders: ['set-cookie2', 'x-token'],
    });
  });
  it('§5.4: Pragma: no-cache without Cache-Control acts as no-cache; with Cache-Control it is ignored', () => {
    expect(fresh({ pragma: 'no-cache' })).toEqual({ storable: false, reason: 'pragma: no-cache' });
    expect(fresh({ pragma: 'no-cache', etag: '"a"' })).toMatchObject({ storable: true, ttl: 0, mustRevalidate: true });
    expect(fresh({ pragma: 'no-cache', 'cache-control': 'max-age=60' })).toMatchObject({ storable: true, ttl: 60_000, mustRevalidate: false });
  });
});

describe('serving stale (RFC 9111 §4.2.4, RFC 5861)', () => {
  it('RFC 5861: stale-while-revalidate and stale-if-error give stale windows', () => {
    expect(fresh({ 'cache-control': 'max-age=60, stale-while-revalidate=30, stale-if-error=600' })).toMatchObject({
      ttl: 60_000,
      mustRevalidate: false,
      staleWhileRevalidate: 30_000,
      staleIfError: 600_000,
    });
    expect(fresh({ 'cache-control': 'max-age=0, stale-while-revalidate=30' })).toMatchObject({ ttl: 0, staleWhileRevalidate: 30_000 });
  });
  it('RFC 5861: invalid or zero windows are ignored; windows are capped by maxTtl', () => {
    const f = fresh({ 'cache-control': 'max-age=60, stale-while-revalidate=abc, stale-if-error=0' });
    expect(f).not.toHaveProperty('staleWhileRevalidate');
    expect(f).not.toHaveProperty('staleIfError');
    expect(fresh({ 'cache-control': 'max-age=60, stale-if-error=999999' }, 200, { maxTtl: 3_600_000 })).toMatchObject({ staleIfError: 3_600_000 });
  });
  it('§5.2.2.2 must-revalidate, §5.2.2.8 proxy-revalidate, §5.2.2.10 s-maxage forbid serving stale', () => {
    for (const cc of ['must-revalidate', 'proxy-revalidate', 's-maxage=60', 'no-cache']) {
      const f = fresh({ 'cache-control': `max-age=60, ${cc}, stale-while-revalidate=30, stale-if-error=30`, etag: '"x"' });
      expect(f, cc).toMatchObject({ storable: true, mustRevalidate: true });
      expect(f, cc).not.toHaveProperty('staleWhileRevalidate');
      expect(f, cc).not.toHaveProperty('staleIfError');
    }
  });
});
