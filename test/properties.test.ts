/**
 * Property-based tests (fast-check) of the pure parts: Cache-Control and HTTP-date parsing,
 * the HTTP cache key, Range, durations and the stored entry format. Each property states what
 * must hold for every input of its kind; a failure prints the smallest counterexample found
 * and the seed that replays it (`fc.assert` reports both).
 */
import type { IncomingHttpHeaders } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_DELTA_SECONDS, parseCacheControl } from '../src/http/rules/cache-control.js';
import { defaultCacheKey, hasUnkeyedInput, UNKEYED_INPUT_HEADERS, userCacheKey, varyKeySuffix } from '../src/http/rules/cache-key.js';
import { MAY_BYPASS, requestBypassReason, requestScanner, UNKEYED_INPUT } from '../src/http/rules/cacheability.js';
import { formatHttpDate, parseHttpDate } from '../src/http/rules/http-date.js';
import { parseSingleRange } from '../src/http/rules/range.js';
import { toMs } from '../src/shared/duration.js';
import { InvalidOptionError } from '../src/shared/errors.js';
import { EntryCodec } from '../src/store/codec.js';
import { CorruptEntryError, decodeEntry, EntryKind } from '../src/store/entry.js';
import { jsonSerializer, v8Serializer } from '../src/store/serializer.js';
import type { StoredEntry } from '../src/store/types.js';

/** Short strings over the characters that delimit things in headers, URLs and keys: collisions are likely to be tried. */
const tricky = (maxLength = 6) => fc.string({ unit: fc.constantFrom('a', 'A', 'b', '=', '&', '?', '/', '"', '\\', '\n', ',', ' ', ';', '[', ']', '%'), maxLength });

describe('Cache-Control parsing', () => {
  const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,8}$/);
  const directive = fc.record({
    name: token,
    value: fc.oneof(
      fc.constant<true>(true),
      fc.record({ kind: fc.constant('token' as const), text: fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,8}$/) }),
      fc.record({ kind: fc.constant('quoted' as const), text: fc.string({ maxLength: 10 }) }),
    ),
  });
  const separator = fc.constantFrom(',', ', ', ' ,', ',,', ' , \t');

  function serialize(d: { name: string; value: true | { kind: 'token' | 'quoted'; text: string } }): string {
    if (d.value === true) return d.name;
    if (d.value.kind === 'token') return `${d.name}=${d.value.text}`;
    return `${d.name}="${d.value.text.replace(/["\\]/g, (c) => `\\${c}`)}"`;
  }

  it('never throws, whatever the header lines', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.array(fc.string())), (value) => {
        const parsed = parseCacheControl(value);
        for (const name of parsed.names()) {
          expect(name).toBe(name.toLowerCase());
          expect(name).not.toBe('');
          parsed.seconds(name);
          parsed.fieldNames(name);
        }
      }),
    );
  });

  it('reads back every directive and argument it was given, in order, whatever the separators', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(directive, separator), { maxLength: 8 }), (list) => {
        const header = list.map(([d, sep]) => serialize(d) + sep).join('');
        const parsed = parseCacheControl(header);
        const expected = new Map<string, (string | true)[]>();
        for (const [d] of list) {
          const name = d.name.toLowerCase();
          expected.set(name, [...(expected.get(name) ?? []), d.value === true ? true : d.value.text]);
        }
        expect(parsed.names()).toEqual([...expected.keys()]);
        for (const [name, values] of expected) expect(parsed.values(name)).toEqual(values);
      }),
    );
  });

  it('reads several header lines as one comma-separated line', () => {
    fc.assert(
      fc.property(fc.array(fc.array(directive, { maxLength: 4 }).map((ds) => ds.map(serialize).join(', ')), { maxLength: 4 }), (lines) => {
        const several = parseCacheControl(lines);
        const one = parseCacheControl(lines.join(', '));
        expect(several.names()).toEqual(one.names());
        for (const name of one.names()) expect(several.values(name)).toEqual(one.values(name));
      }),
    );
  });

  it('gives delta-seconds as the number (capped at 2^31), bare or quoted, and invalid for anything but digits or for two different values', () => {
    const digits = fc.stringMatching(/^[0-9]{1,14}$/);
    const expected = (d: string) => Number(BigInt(d) > BigInt(MAX_DELTA_SECONDS) ? BigInt(MAX_DELTA_SECONDS) : BigInt(d));
    fc.assert(
      fc.property(digits, digits, (a, b) => {
        expect(parseCacheControl(`max-age=${a}`).seconds('max-age')).toBe(expected(a));
        expect(parseCacheControl(`MAX-AGE="${a}"`).seconds('max-age')).toBe(expected(a));
        expect(parseCacheControl(`max-age=${a}, max-age=${b}`).seconds('max-age')).toBe(expected(a) === expected(b) ? expected(a) : 'invalid');
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 8 }).filter((s) => !/^[0-9]+[ \t]*$/.test(s.trim()) && !s.includes(',') && !s.startsWith('"')), (text) => {
        expect(parseCacheControl(`max-age=${text}`).seconds('max-age')).toBe('invalid');
      }),
    );
  });
});

describe('HTTP-date parsing', () => {
  // Years 1970..9999: what an HTTP-date can carry (four digits).
  const instant = fc.integer({ min: 0, max: Date.UTC(9999, 11, 31, 23, 59, 59) });

  it('reads back what formatHttpDate wrote, to the second', () => {
    fc.assert(
      fc.property(instant, (ms) => {
        expect(parseHttpDate(formatHttpDate(ms))).toBe(Math.floor(ms / 1000) * 1000);
      }),
    );
  });

  it('reads the asctime form and any letter case of the same instant alike', () => {
    fc.assert(
      fc.property(instant, (ms) => {
        const d = new Date(ms);
        const [day, , mon] = formatHttpDate(ms).split(' ') as [string, string, string];
        const pad = (n: number) => String(n).padStart(2, '0');
        const asctime = `${day.slice(0, 3)} ${mon} ${String(d.getUTCDate()).padStart(2, ' ')} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} ${d.getUTCFullYear()}`;
        const expected = Math.floor(ms / 1000) * 1000;
        expect(parseHttpDate(asctime)).toBe(expected);
        expect(parseHttpDate(formatHttpDate(ms).toLowerCase())).toBe(expected);
        expect(parseHttpDate(formatHttpDate(ms).toUpperCase())).toBe(expected);
      }),
    );
  });

  it('never throws; answers undefined or a whole second', () => {
    const dateish = fc.tuple(
      fc.constantFrom('Sun', 'Mon', 'Tue', 'Thursday', 'xxx'),
      fc.integer({ min: -1, max: 99 }),
      fc.constantFrom('Jan', 'Feb', 'feb', 'Dec', 'Foo'),
      fc.integer({ min: 0, max: 99999 }),
      fc.integer({ min: 0, max: 99 }),
      fc.constantFrom('GMT', 'UTC', ''),
    ).map(([day, dd, mon, year, hh, zone]) => `${day}, ${String(dd).padStart(2, '0')} ${mon} ${year} ${hh}:59:60 ${zone}`);
    fc.assert(
      fc.property(fc.oneof(fc.string(), dateish), (text) => {
        const t = parseHttpDate(text);
        if (t !== undefined) {
          expect(Number.isFinite(t)).toBe(true);
          expect(t % 1000).toBe(0);
        }
      }),
    );
  });
});

describe('HTTP cache key', () => {
  interface Req {
    method: string;
    host: string;
    path: string;
    params: string[];
    headers: Partial<Record<(typeof UNKEYED_INPUT_HEADERS)[number], string | string[]>>;
  }
  const req: fc.Arbitrary<Req> = fc.record({
    method: fc.constantFrom('GET', 'HEAD', 'get', 'OPTIONS'),
    host: fc.string({ unit: fc.constantFrom('a', 'A', '.', ':', '/', '"', '[', ']'), maxLength: 4 }),
    path: fc.string({ unit: fc.constantFrom('a', '/', '"', '\\', '\n', '&', '=', '#'), maxLength: 4 }),
    params: fc.array(tricky(3).map((s) => s.replace(/[&?]/g, '')), { maxLength: 3 }),
    headers: fc.dictionary(fc.constantFrom(...UNKEYED_INPUT_HEADERS.slice(0, 3)), fc.oneof(tricky(3), fc.array(tricky(2), { minLength: 1, maxLength: 2 })), { maxKeys: 2 }),
  });
  const url = (r: Req) => (r.params.length === 0 ? r.path : `${r.path}?${r.params.join('&')}`);
  const headers = (r: Req) => ({ host: r.host, ...r.headers }) as IncomingHttpHeaders;
  const key = (r: Req) => defaultCacheKey(r.method, url(r), headers(r));

  /** What the key must tell apart: everything but HEAD/GET, the host's case and the order of differently named parameters. */
  function meaning(r: Req): string {
    const params = r.params.filter((p) => p !== '');
    const name = (p: string) => (p.includes('=') ? p.slice(0, p.indexOf('=')) : p);
    const sorted = params.map((p, i) => [name(p), i, p] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
    const hs = UNKEYED_INPUT_HEADERS.map((h) => r.headers[h]).map((v) => (Array.isArray(v) ? v.join(', ') : v));
    return JSON.stringify([r.method === 'HEAD' ? 'GET' : r.method, r.host.toLowerCase(), r.path, sorted.map((p) => p[2]), hs]);
  }

  it('is the JSON array of method, host, path and sorted query, written as JSON.stringify writes it (any characters, lone surrogates included)', () => {
    const text = fc.string({ unit: fc.oneof(fc.constantFrom('"', '\\', '\n', '\u0000', '\u001f', '\u2028', '\ud800', '\udfff', '😀', '/', 'a', '='), fc.string({ unit: 'binary', maxLength: 1 })), maxLength: 8 });
    fc.assert(
      fc.property(fc.constantFrom('GET', 'HEAD'), text, text, (method, host, path) => {
        const p = `/${path.replace(/\?/g, '')}`;
        expect(defaultCacheKey(method, p, { host })).toBe(`http:${JSON.stringify(['GET', host.toLowerCase(), p, ''])}`);
      }),
      { numRuns: 2000 },
    );
  });

  it('two requests share a key exactly when they mean the same request', () => {
    fc.assert(
      fc.property(req, req, (a, b) => {
        expect(key(a) === key(b)).toBe(meaning(a) === meaning(b));
      }),
      { numRuns: 2000 },
    );
  });

  it('stays apart with the Vary part appended, and from every user key', () => {
    const vary = fc.array(fc.constantFrom('accept', 'accept-language', 'x-a'), { maxLength: 2 });
    const values = fc.dictionary(fc.constantFrom('accept', 'accept-language', 'x-a'), tricky(3), { maxKeys: 3 });
    fc.assert(
      fc.property(req, vary, values, req, vary, values, tricky(), (a, va, ha, b, vb, hb, user) => {
        const full = (r: Req, names: string[], h: Record<string, string>) => key(r) + varyKeySuffix(names, { ...headers(r), ...h });
        const same = meaning(a) === meaning(b) && JSON.stringify(va.map((n) => [n, ha[n] ?? null])) === JSON.stringify(vb.map((n) => [n, hb[n] ?? null]));
        expect(full(a, va, ha) === full(b, vb, hb)).toBe(same);
        expect(key(a)).not.toContain('\n');
        expect(userCacheKey(user)).not.toContain('\n');
        expect(userCacheKey(user)).not.toBe(key(a));
      }),
      { numRuns: 1000 },
    );
    fc.assert(
      fc.property(tricky(), tricky(), (x, y) => {
        expect(userCacheKey(x) === userCacheKey(y)).toBe(x === y);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('request scan', () => {
  const names = fc.constantFrom('accept', 'range', 'content-length', 'transfer-encoding', 'authorization', 'cookie', 'x-api-key', ...UNKEYED_INPUT_HEADERS);
  const value = fc.oneof(fc.constantFrom('0', '1', '', 'a', 'bytes=0-1'), fc.constant(undefined), fc.array(fc.constantFrom('a', '0'), { minLength: 1, maxLength: 2 }));
  const headers = fc
    .tuple(fc.dictionary(names, value, { maxKeys: 6 }), fc.option(fc.constantFrom('example.com', 'a b', 'x:1')))
    .map(([fields, host]) => (host === null ? fields : { ...fields, host }) as IncomingHttpHeaders);
  const privateLists = fc.constantFrom<string[][]>([], ['authorization', 'cookie'], ['authorization', 'cookie', 'x-api-key']);

  it('agrees with the per-name checks: no MAY_BYPASS bit leaves only the host to check, and UNKEYED_INPUT is hasUnkeyedInput', () => {
    fc.assert(
      fc.property(headers, privateLists, fc.constantFrom('GET', 'HEAD'), (h, privateHeaders, method) => {
        const scan = requestScanner(privateHeaders)(h);
        const reason = requestBypassReason(method, h, privateHeaders);
        if ((scan & MAY_BYPASS) === 0) expect([undefined, 'host']).toContain(reason);
        if (reason !== undefined && reason !== 'host') expect(scan & MAY_BYPASS).toBe(MAY_BYPASS);
        expect((scan & UNKEYED_INPUT) !== 0).toBe(hasUnkeyedInput(h));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('Range', () => {
  const size = fc.integer({ min: 0, max: 10_000 });
  const pos = fc.integer({ min: 0, max: 20_000 });

  it('never throws, and a partial answer always lies inside the representation', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom('b', 'y', 't', 'e', 's', '=', '-', ',', ' ', '0', '1', '9') })), size, (header, n) => {
        const r = parseSingleRange(header, n);
        if (r.kind === 'partial') {
          expect(Number.isSafeInteger(r.start) && Number.isSafeInteger(r.end)).toBe(true);
          expect(0 <= r.start && r.start <= r.end && r.end < n).toBe(true);
        }
      }),
    );
  });

  it('answers bytes=a-b, bytes=a- and bytes=-n as RFC 9110 §14.1.2 says', () => {
    fc.assert(
      fc.property(pos, pos, size, fc.constantFrom('bytes', 'BYTES', 'Bytes'), fc.constantFrom('', ' '), (a, b, n, unit, sp) => {
        const [first, last] = a <= b ? [a, b] : [b, a];
        expect(parseSingleRange(`${unit}=${sp}${first}-${last}`, n)).toEqual(first >= n ? { kind: 'unsatisfiable' } : { kind: 'partial', start: first, end: Math.min(last, n - 1) });
        expect(parseSingleRange(`${unit}=${first}-`, n)).toEqual(first >= n ? { kind: 'unsatisfiable' } : { kind: 'partial', start: first, end: n - 1 });
        expect(parseSingleRange(`${unit}=-${a}`, n)).toEqual(a === 0 || n === 0 ? { kind: 'unsatisfiable' } : { kind: 'partial', start: Math.max(0, n - a), end: n - 1 });
        if (first < last) expect(parseSingleRange(`bytes=${last}-${first}`, n).kind).toBe('ignore');
        expect(parseSingleRange(`bytes=${first}-${last}, ${first}-`, n).kind).toBe('ignore');
        expect(parseSingleRange(`items=${first}-${last}`, n).kind).toBe('ignore');
      }),
    );
  });
});

describe('durations', () => {
  const UNIT: Record<string, number> = { '': 1, ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

  /** The longest duration a timer can hold (2^31 - 1 ms); anything longer is refused. */
  const MAX_MS = 2_147_483_647;

  it('a number is itself, rounded up to a whole millisecond; past 2^31 - 1 ms it is refused', () => {
    fc.assert(
      fc.property(fc.double({ min: Number.MIN_VALUE, max: 1e15, noNaN: true }), (n) => {
        if (Math.ceil(n) <= MAX_MS) expect(toMs(n, 'ttl')).toBe(Math.ceil(n));
        else expect(() => toMs(n, 'ttl')).toThrow(InvalidOptionError);
      }),
    );
  });

  it('a string is its number times its unit, spaces allowed around', () => {
    fc.assert(
      fc.property(fc.nat({ max: 1e6 }), fc.option(fc.nat({ max: 999 }), { nil: undefined }), fc.constantFrom('', 'ms', 's', 'm', 'h', 'd'), fc.constantFrom('', ' '), (whole, frac, unit, sp) => {
        const text = frac === undefined ? String(whole) : `${whole}.${frac}`;
        const ms = Number(text) * UNIT[unit]!;
        const input = `${sp}${text}${sp}${unit}${sp}`;
        if (Math.ceil(ms) > MAX_MS) {
          expect(() => toMs(input, 'ttl')).toThrow(InvalidOptionError);
          return;
        }
        if (ms > 0) expect(toMs(input, 'ttl')).toBe(Math.ceil(ms));
        else expect(() => toMs(input, 'ttl')).toThrow(InvalidOptionError);
        expect(toMs(input, 'ttl', { allowZero: true })).toBe(Math.ceil(ms));
      }),
    );
  });

  it('anything else is an InvalidOptionError naming the option, never another error', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.anything(), fc.constantFrom(NaN, Infinity, -Infinity, -1, 0, -0, '1e3', '-5s', '5 sec', '')), (value) => {
        let result: number | undefined;
        try {
          result = toMs(value, 'lockTtl');
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidOptionError);
          expect((error as InvalidOptionError).option).toBe('lockTtl');
          return;
        }
        expect(Number.isSafeInteger(result) || Number.isFinite(result)).toBe(true);
        expect(result).toBeGreaterThan(0);
      }),
    );
  });
});

describe('the entry codec', () => {
  const finite = fc.double({ min: 0, max: 1e13, noNaN: true });
  const window = fc.record(
    {
      stale: finite,
      delta: finite,
      revalidate: finite,
      staleIfError: finite,
      tags: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { minLength: 1, maxLength: 5 }),
    },
    { requiredKeys: [] },
  );
  const value = fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withSparseArray: true, withNullPrototype: false, withBoxedValues: false });

  function entryOf(v: unknown, createdAt: number, ttl: number, w: Partial<StoredEntry>): StoredEntry {
    return { kind: EntryKind.Value, value: v, createdAt, ttl, ...w };
  }

  it('decodes whatever it encoded (v8 serializer)', () => {
    const codec = new EntryCodec(v8Serializer);
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 4e12 }), fc.integer({ min: 1, max: 1e10 }), window, (v, createdAt, ttl, w) => {
        const entry = entryOf(v, createdAt, ttl, w);
        const decoded = codec.decode(codec.encode('k', entry));
        expect('error' in decoded).toBe(false);
        const d = decoded as StoredEntry;
        expect(d.value).toStrictEqual(v);
        expect(d.kind).toBe(EntryKind.Value);
        expect(d.createdAt).toBe(createdAt);
        expect(d.ttl).toBeCloseTo(ttl, 3);
        expect(d.stale).toBeCloseTo(w.stale ?? 0, 3);
        expect(d.delta).toBe(w.delta ?? 0);
        expect(d.revalidate).toBe(w.revalidate);
        expect(d.staleIfError).toBe(w.staleIfError);
        expect(d.tags).toEqual(w.tags);
      }),
      { numRuns: 300 },
    );
  });

  it('decodes whatever it encoded (JSON serializer)', () => {
    const codec = new EntryCodec(jsonSerializer);
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 0, max: 4e12 }), fc.integer({ min: 1, max: 1e10 }), window, (v, createdAt, ttl, w) => {
        const decoded = codec.decode(codec.encode('k', entryOf(v, createdAt, ttl, w))) as StoredEntry;
        expect(JSON.stringify(decoded.value)).toBe(JSON.stringify(v));
        expect(decoded.tags).toEqual(w.tags);
      }),
    );
  });

  it('decodes any byte string or reports it corrupt, never throws', () => {
    const codec = new EntryCodec(v8Serializer);
    // Random bytes, bytes that start like an entry (magic, a known version and kind), and valid
    // entries with a byte changed or cut short.
    const header = fc.tuple(fc.constantFrom(1, 2, 3), fc.constantFrom(1, 2, 3), fc.uint8Array({ maxLength: 80 })).map(([version, kind, rest]) => Buffer.from([0xd0, 0x67, version, kind, ...rest]));
    const damaged = fc
      .tuple(fc.jsonValue(), window, fc.nat(), fc.nat({ max: 255 }), fc.boolean())
      .map(([v, w, at, byte, cut]) => {
        const bytes = codec.encode('k', entryOf(v, 1_700_000_000_000, 60_000, w));
        const i = at % bytes.length;
        if (cut) return bytes.subarray(0, i);
        bytes[i] = byte;
        return bytes;
      });
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 120 }).map((b) => Buffer.from(b)), header, damaged), (bytes) => {
        // The header either reads or is reported corrupt (no RangeError from reading past the end).
        try {
          decodeEntry(bytes);
        } catch (error) {
          expect(error).toBeInstanceOf(CorruptEntryError);
        }
        const decoded = codec.decode(bytes);
        if ('error' in decoded) {
          expect(decoded.error).toBeInstanceOf(Error);
          return;
        }
        expect([EntryKind.Value, EntryKind.HitForMiss]).toContain(decoded.kind);
        expect([decoded.createdAt, decoded.ttl, decoded.stale ?? 0, decoded.delta ?? 0].every(Number.isFinite)).toBe(true);
        expect(decoded.ttl).toBeGreaterThanOrEqual(0);
        expect(decoded.stale ?? 0).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 2000 },
    );
  });
});
