import { describe, expect, it } from 'vitest';
import { appendCacheStatus, cacheStatusNameProblem, formatCacheStatus, sfTokenOrString, ttlSeconds } from '../src/http/rules/cache-status.js';
import { evaluateConditional, mergeNotModified, notModifiedHeaders, parseEntityTagList, revalidationHeaders } from '../src/http/rules/conditional.js';
import { formatHttpDate } from '../src/http/rules/http-date.js';
import { invalidationTargets } from '../src/http/rules/invalidation.js';
import { answerRange, ifRangeAllows, parseSingleRange } from '../src/http/rules/range.js';

const T = Date.UTC(2026, 0, 1, 12, 0, 0);
const date = (offsetSeconds: number) => formatHttpDate(T + offsetSeconds * 1000);

describe('conditional requests answered from the cache (RFC 9110 §13, RFC 9111 §4.3.2)', () => {
  const stored = { etag: '"v1"', 'last-modified': date(-3600), date: date(0), 'content-type': 'text/plain' };
  it('§13.1.2: If-None-Match uses the weak comparison, accepts lists and *', () => {
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-none-match': 'W/"v1"' }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, { etag: 'W/"v1"' })).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '"a", "b" ,"v1"' }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-none-match': ['"a"', '"v1"'] }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '*' }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '*' }, {})).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '"v2"' }, stored)).toBe('full');
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, { 'last-modified': date(-3600) })).toBe('full');
    expect(evaluateConditional({ 'if-none-match': 'v1' }, stored)).toBe('full');
  });
  it('§8.8.3: a comma inside an entity-tag does not split the list', () => {
    expect(parseEntityTagList(['"a,b", W/"c"'])).toEqual([
      { weak: false, opaque: '"a,b"' },
      { weak: true, opaque: '"c"' },
    ]);
    expect(evaluateConditional({ 'if-none-match': '"a,b"' }, { etag: '"a,b"' })).toBe('304');
  });
  it('§13.2.2: If-None-Match takes precedence over If-Modified-Since', () => {
    expect(evaluateConditional({ 'if-none-match': '"v2"', 'if-modified-since': date(0) }, stored)).toBe('full');
    expect(evaluateConditional({ 'if-none-match': '"v1"', 'if-modified-since': date(-7200) }, stored)).toBe('304');
  });
  it('§13.1.3: If-Modified-Since against Last-Modified', () => {
    expect(evaluateConditional({ 'if-modified-since': date(-3600) }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-modified-since': date(-60) }, stored)).toBe('304');
    expect(evaluateConditional({ 'if-modified-since': date(-3601) }, stored)).toBe('full');
  });
  it('§13.1.3: an invalid date or a list is ignored', () => {
    expect(evaluateConditional({ 'if-modified-since': 'yesterday' }, stored)).toBe('full');
    expect(evaluateConditional({ 'if-modified-since': [date(0), date(0)] }, stored)).toBe('full');
  });
  it('RFC 9111 §4.3.2: without Last-Modified, the stored Date, then the time it was received', () => {
    expect(evaluateConditional({ 'if-modified-since': date(0) }, { date: date(-10) })).toBe('304');
    expect(evaluateConditional({ 'if-modified-since': date(-20) }, { date: date(-10) })).toBe('full');
    expect(evaluateConditional({ 'if-modified-since': date(0) }, {})).toBe('full');
    expect(evaluateConditional({ 'if-modified-since': date(0) }, {}, { receivedAt: T - 5000 })).toBe('304');
  });
  it('§13.2.1: only GET and HEAD, only for a 2xx stored response', () => {
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, stored, { method: 'HEAD' })).toBe('304');
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, stored, { method: 'POST' })).toBe('full');
    expect(evaluateConditional({ 'if-none-match': '"v1"' }, stored, { status: 404 })).toBe('full');
    expect(evaluateConditional({}, stored)).toBe('full');
  });
  it('§15.4.5: the headers a 304 carries', () => {
    expect(notModifiedHeaders({ ...stored, 'cache-control': 'max-age=60', vary: 'accept', 'content-length': '5', expires: date(60) })).toEqual({
      'cache-control': 'max-age=60',
      date: date(0),
      etag: '"v1"',
      expires: date(60),
      vary: 'accept',
    });
    expect(notModifiedHeaders({ 'last-modified': date(-3600), 'content-location': '/a' })).toEqual({
      'content-location': '/a',
      'last-modified': date(-3600),
    });
  });
});

describe('revalidation with the handler (RFC 9111 §4.3.1, §4.3.4)', () => {
  it('§4.3.1: the validators of the stored response become conditional headers', () => {
    expect(revalidationHeaders({ etag: '"v1"', 'last-modified': date(-60) })).toEqual({ 'if-none-match': '"v1"', 'if-modified-since': date(-60) });
    expect(revalidationHeaders({ etag: 'W/"v1"' })).toEqual({ 'if-none-match': 'W/"v1"' });
    expect(revalidationHeaders({ 'last-modified': 'not a date', etag: 'unquoted' })).toEqual({});
    expect(revalidationHeaders({})).toEqual({});
  });
  it('§3.2: a 304 updates the stored headers except Content-Length, the body coding, hop-by-hop fields', () => {
    const stored = { 'content-type': 'text/plain', 'content-length': '5', 'content-encoding': 'gzip', etag: '"v1"', 'cache-control': 'max-age=10', 'x-old': '1' };
    const merged = mergeNotModified(stored, {
      etag: '"v1"',
      'cache-control': 'max-age=60',
      date: date(0),
      'content-length': '0',
      'content-encoding': 'br',
      connection: 'x-hop',
      'x-hop': 'a',
      'keep-alive': 'timeout=5',
      'x-new': '2',
      age: '3',
    });
    expect(merged).toEqual({
      'content-type': 'text/plain',
      'content-length': '5',
      'content-encoding': 'gzip',
      etag: '"v1"',
      'cache-control': 'max-age=60',
      'x-old': '1',
      date: date(0),
      'x-new': '2',
    });
  });
  it('§3.2: the representation metadata and security headers of a 304 replace the stored ones', () => {
    const stored = {
      'content-type': 'text/plain',
      'content-location': '/foo',
      'content-md5': 'rL0Y20zC+Fzt72VPzMSk2A==',
      'content-security-policy': "default-src 'self'",
      'x-frame-options': 'deny',
      expires: date(1),
      'cache-control': 'max-age=1',
      'last-modified': date(-86_400),
    };
    const of304 = {
      'content-type': 'text/plain;charset=utf-8',
      'content-location': '/bar',
      'content-md5': 'N7UdGUp1E+RbVvZSTy1R8g==',
      'content-security-policy': "default-src 'self' cdn.example.com",
      'x-frame-options': 'sameorigin',
      expires: date(3600),
      'cache-control': 'max-age=3600',
      'last-modified': date(-86_400),
    };
    expect(mergeNotModified(stored, of304)).toEqual(of304);
    // A 304 that omits a header keeps the stored one.
    expect(mergeNotModified({ ...stored, 'test-header': 'A' }, { 'last-modified': date(-86_400) })).toMatchObject({ 'test-header': 'A' });
  });
  it('§4.3.4: a 304 whose validator names another representation does not update the stored one', () => {
    expect(mergeNotModified({ etag: '"v1"' }, { etag: '"v2"' })).toBeUndefined();
    expect(mergeNotModified({ etag: 'W/"v1"' }, { etag: 'W/"v2"' })).toBeUndefined();
    expect(mergeNotModified({}, { etag: '"v2"' })).toBeUndefined();
    expect(mergeNotModified({ 'last-modified': date(-60) }, { 'last-modified': date(-30) })).toBeUndefined();
    expect(mergeNotModified({ etag: 'W/"v1"' }, { etag: '"v1"' })).toEqual({ etag: '"v1"' });
    expect(mergeNotModified({ 'last-modified': date(-60) }, { 'last-modified': date(-60), 'x-a': 'b' })).toEqual({ 'last-modified': date(-60), 'x-a': 'b' });
    // A 304 without validators answers the conditional request built from this stored response.
    expect(mergeNotModified({ etag: '"v1"', 'cache-control': 'max-age=1' }, { 'cache-control': 'max-age=9' })).toEqual({
      etag: '"v1"',
      'cache-control': 'max-age=9',
    });
  });
  it('§3.2: header names of either side in any case come out lower-case', () => {
    expect(mergeNotModified({ 'Content-Type': 'a', ETag: '"1"' }, { ETag: '"1"', 'Cache-Control': 'max-age=5' })).toEqual({
      'content-type': 'a',
      etag: '"1"',
      'cache-control': 'max-age=5',
    });
  });
});

describe('ranges from a stored full response (RFC 9110 §14)', () => {
  it('§14.1.2: bytes=a-b, a-, -n', () => {
    expect(parseSingleRange('bytes=0-4', 10)).toEqual({ kind: 'partial', start: 0, end: 4 });
    expect(parseSingleRange('bytes=5-', 10)).toEqual({ kind: 'partial', start: 5, end: 9 });
    expect(parseSingleRange('bytes=-3', 10)).toEqual({ kind: 'partial', start: 7, end: 9 });
    expect(parseSingleRange('BYTES=1-1', 10)).toEqual({ kind: 'partial', start: 1, end: 1 });
    expect(parseSingleRange('bytes= 2 - 3 ', 10)).toEqual({ kind: 'partial', start: 2, end: 3 });
  });
  it('§14.1.2: a last position past the end is clamped; a suffix longer than the body takes all of it', () => {
    expect(parseSingleRange('bytes=5-999', 10)).toEqual({ kind: 'partial', start: 5, end: 9 });
    expect(parseSingleRange('bytes=-999', 10)).toEqual({ kind: 'partial', start: 0, end: 9 });
    expect(parseSingleRange('bytes=0-99999999999999999999', 10)).toEqual({ kind: 'partial', start: 0, end: 9 });
  });
  it('§14.1.2, §15.5.17: unsatisfiable ranges', () => {
    expect(parseSingleRange('bytes=10-', 10)).toEqual({ kind: 'unsatisfiable' });
    expect(parseSingleRange('bytes=10-20', 10)).toEqual({ kind: 'unsatisfiable' });
    expect(parseSingleRange('bytes=-0', 10)).toEqual({ kind: 'unsatisfiable' });
    expect(parseSingleRange('bytes=0-0', 0)).toEqual({ kind: 'unsatisfiable' });
    expect(parseSingleRange('bytes=-5', 0)).toEqual({ kind: 'unsatisfiable' });
    expect(parseSingleRange('bytes=99999999999999999999-', 10)).toEqual({ kind: 'unsatisfiable' });
  });
  it('§14.2: invalid syntax, other units and several ranges are ignored (the full 200 is sent)', () => {
    for (const r of ['bytes=5-2', 'bytes=a-', 'bytes=-', 'bytes=', 'bytes 0-1', 'items=0-1', 'bytes=0-1-2', 'bytes=0-1;x']) {
      expect(parseSingleRange(r, 10).kind, r).toBe('ignore');
    }
    expect(parseSingleRange('bytes=0-1,3-4', 10)).toEqual({ kind: 'ignore', reason: 'multiple ranges' });
    expect(parseSingleRange('bytes=0-1, 20-30', 10)).toEqual({ kind: 'ignore', reason: 'multiple ranges' });
    expect(parseSingleRange(undefined, 10).kind).toBe('ignore');
  });
  it('§13.1.5: If-Range with a strong ETag or the exact Last-Modified', () => {
    const stored = { etag: '"v1"', 'last-modified': date(-60) };
    expect(ifRangeAllows({}, stored)).toBe(true);
    expect(ifRangeAllows({ 'if-range': '"v1"' }, stored)).toBe(true);
    expect(ifRangeAllows({ 'if-range': '"v2"' }, stored)).toBe(false);
    expect(ifRangeAllows({ 'if-range': 'W/"v1"' }, stored)).toBe(false);
    expect(ifRangeAllows({ 'if-range': '"v1"' }, { etag: 'W/"v1"' })).toBe(false);
    expect(ifRangeAllows({ 'if-range': date(-60) }, stored)).toBe(true);
    expect(ifRangeAllows({ 'if-range': date(-59) }, stored)).toBe(false);
    expect(ifRangeAllows({ 'if-range': 'garbage' }, stored)).toBe(false);
  });
  it('what to send: 206 with Content-Range and the slice, 416 with bytes */size, or the full 200', () => {
    const stored = { etag: '"v1"' };
    expect(answerRange('GET', { range: 'bytes=2-5' }, stored, 10)).toEqual({
      status: 206,
      start: 2,
      end: 5,
      headers: { 'content-range': 'bytes 2-5/10', 'content-length': '4' },
    });
    expect(answerRange('GET', { range: 'bytes=20-' }, stored, 10)).toEqual({ status: 416, headers: { 'content-range': 'bytes */10' } });
    expect(answerRange('GET', { range: 'bytes=0-1,4-5' }, stored, 10)).toEqual({ status: 200 });
    expect(answerRange('GET', { range: 'bytes=0-1', 'if-range': '"old"' }, stored, 10)).toEqual({ status: 200 });
    expect(answerRange('GET', { range: 'bytes=20-', 'if-range': '"old"' }, stored, 10)).toEqual({ status: 200 });
    expect(answerRange('HEAD', { range: 'bytes=0-1' }, stored, 10)).toEqual({ status: 200 });
    expect(answerRange('GET', {}, stored, 10)).toEqual({ status: 200 });
  });
});

describe('Cache-Status (RFC 9211)', () => {
  it('§2.1-§2.8: hit, miss stored, collapsed, bypass with detail, stale as a hit with a negative ttl', () => {
    expect(formatCacheStatus({ hit: true, ttl: 42_900 })).toBe('dogpile-guard; hit; ttl=42');
    expect(formatCacheStatus({ fwd: 'miss', stored: true })).toBe('dogpile-guard; fwd=miss; stored');
    expect(formatCacheStatus({ fwd: 'miss', stored: true, ttl: 60_000 })).toBe('dogpile-guard; fwd=miss; stored; ttl=60');
    expect(formatCacheStatus({ fwd: 'miss', collapsed: true })).toBe('dogpile-guard; fwd=miss; collapsed');
    expect(formatCacheStatus({ fwd: 'bypass', detail: 'authorization' })).toBe('dogpile-guard; fwd=bypass; detail=authorization');
    expect(formatCacheStatus({ fwd: 'bypass', detail: 'cache-control: no-store' })).toBe('dogpile-guard; fwd=bypass; detail="cache-control: no-store"');
    expect(formatCacheStatus({ hit: true, ttl: -2_500 })).toBe('dogpile-guard; hit; ttl=-3');
    expect(formatCacheStatus({ fwd: 'stale', fwdStatus: 304, stored: true })).toBe('dogpile-guard; fwd=stale; fwd-status=304; stored');
    expect(formatCacheStatus({ hit: true, key: 'GET "/a"' })).toBe('dogpile-guard; hit; key="GET \\"/a\\""');
  });
  it('§2.4: a stale response never shows ttl=0', () => {
    expect(ttlSeconds(-1)).toBe(-1);
    expect(ttlSeconds(0)).toBe(0);
    expect(ttlSeconds(999)).toBe(0);
    expect(ttlSeconds(-1000)).toBe(-1);
    expect(Object.is(ttlSeconds(-0), 0)).toBe(true);
  });
  it('§2: the cache name is configurable, written as an sf-token or an escaped sf-string', () => {
    expect(formatCacheStatus({ hit: true }, 'edge-1.example:8080')).toBe('edge-1.example:8080; hit');
    expect(formatCacheStatus({ hit: true }, 'my cache')).toBe('"my cache"; hit');
    expect(formatCacheStatus({ hit: true }, '1cache')).toBe('"1cache"; hit');
    expect(sfTokenOrString('a "b" \\ c')).toBe('"a \\"b\\" \\\\ c"');
    expect(sfTokenOrString('é')).toBe('"?"');
    expect(cacheStatusNameProblem('dogpile-guard')).toBeUndefined();
    expect(cacheStatusNameProblem('')).toBe('must be a non-empty string');
    expect(cacheStatusNameProblem('caché')).toBe('must be printable ASCII');
  });
  it('§2: this cache appends its member after those of caches nearer the origin', () => {
    expect(appendCacheStatus(undefined, 'dogpile-guard; hit')).toBe('dogpile-guard; hit');
    expect(appendCacheStatus('origin-cache; fwd=miss', 'dogpile-guard; hit')).toBe('origin-cache; fwd=miss, dogpile-guard; hit');
    expect(appendCacheStatus(['a; hit', ' '], 'b; hit')).toBe('a; hit, b; hit');
  });
});

describe('invalidation on writes (RFC 9111 §4.4)', () => {
  it('§4.4: a 2xx or 3xx to an unsafe method invalidates the request URL', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'M-SEARCH', 'PURGE', 'post']) {
      expect(invalidationTargets(method, 200, '/items/1?x=1', 'api.example', {}), method).toEqual(['/items/1?x=1']);
    }
    expect(invalidationTargets('POST', 204, '/a', 'h', {})).toEqual(['/a']);
    expect(invalidationTargets('POST', 303, '/a', 'h', {})).toEqual(['/a']);
  });
  it('§4.4: safe methods and error statuses invalidate nothing', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'TRACE']) expect(invalidationTargets(method, 200, '/a', 'h', {})).toEqual([]);
    for (const status of [100, 400, 404, 500, 503]) expect(invalidationTargets('POST', status, '/a', 'h', {})).toEqual([]);
  });
  it('§4.4: Location and Content-Location on the same host, relative ones resolved against the request URL', () => {
    expect(invalidationTargets('POST', 201, '/items', 'api.example', { location: '/items/7', 'content-location': 'items/7?v=2' })).toEqual([
      '/items',
      '/items/7',
      '/items/7?v=2',
    ]);
    expect(invalidationTargets('PUT', 200, '/a/b', 'api.example', { location: 'c' })).toEqual(['/a/b', '/a/c']);
    expect(invalidationTargets('PUT', 200, '/a', 'API.example:80', { Location: 'http://api.EXAMPLE/x#frag' })).toEqual(['/a', '/x']);
    expect(invalidationTargets('PUT', 200, '/a', 'api.example:8080', { location: 'http://api.example:8080/x' })).toEqual(['/a', '/x']);
    expect(invalidationTargets('PUT', 200, '/a', 'api.example', { location: '/a' })).toEqual(['/a']);
  });
  it('§4.4: never another host', () => {
    expect(invalidationTargets('POST', 302, '/a', 'api.example', { location: 'https://evil.example/a', 'content-location': '//other.example/b' })).toEqual(['/a']);
    expect(invalidationTargets('POST', 302, '/a', 'api.example:8080', { location: 'http://api.example/x' })).toEqual(['/a']);
    expect(invalidationTargets('POST', 302, '/a', 'api.example', { location: 'javascript:alert(1)' })).toEqual(['/a']);
    expect(invalidationTargets('POST', 302, '/a', 'api.example', { location: ['/x', '/y'] })).toEqual(['/a']);
  });
  it('the request URL is kept as the cache key saw it; a fragment is dropped; an absolute form is reduced to its path', () => {
    expect(invalidationTargets('POST', 200, '/a%20b?q=1&p=2#f', 'h', {})).toEqual(['/a%20b?q=1&p=2']);
    expect(invalidationTargets('POST', 200, 'http://h/x?y', 'h', {})).toEqual(['/x?y']);
    expect(invalidationTargets('POST', 200, '/a', 'bad host/x', { location: '/b' })).toEqual(['/a']);
    expect(invalidationTargets('POST', 200, 'http://other.example/x', 'h', {})).toEqual([]);
  });
});
