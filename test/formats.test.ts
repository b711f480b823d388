/**
 * Byte-level pins of what the library stores: samples written by the encoders of the day the
 * format was introduced (test/fixtures/formats/*.bin, made by generate.ts there) must keep
 * decoding, field by field, with today's code. A failure here means stored data written by a
 * released version would no longer be read: bump the format version instead. Entries are
 * checked twice: field by field with the entry format (entry.ts), and through the store's own
 * encoding (`EntryCodec`, what the backends read and write).
 */
import { readFileSync } from 'node:fs';
import { brotliDecompressSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EntryCodec } from '../src/store/codec.js';
import { decodeEntry, encodeEntry, EntryKind, HEADER_SIZE, HEADER_SIZE_V3 } from '../src/store/entry.js';
import { jsonSerializer, portableSerializer, v8Serializer } from '../src/store/serializer.js';
import type { StoredEntry } from '../src/store/types.js';
import { decodeResponse, encodeResponse } from '../src/http/rules/response-format.js';
import { compressibleValue, CREATED_AT, DELTA, jsonValue, MARKER_TTL, portableValue, response, STALE, TAGS, TTL, v8Value } from './fixtures/formats/samples.js';
import { UnknownSerializerError } from '../src/shared/errors.js';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'formats');
const sample = (name: string) => readFileSync(path.join(dir, name));

/** What the store decodes from `bytes` (a decoding error fails the test with its message). */
function storeDecodes(codec: EntryCodec, bytes: Buffer): StoredEntry {
  const decoded = codec.decode(bytes);
  if ('error' in decoded) throw decoded.error;
  return decoded;
}

function expectV8Value(value: ReturnType<typeof v8Value>): void {
  const expected = v8Value();
  expect(Object.keys(value)).toEqual(Object.keys(expected));
  expect(value.text).toBe(expected.text);
  expect(value.int).toBe(expected.int);
  expect(value.float).toBe(expected.float);
  expect(value.nothing).toBeNull();
  expect('missing' in value && value.missing === undefined).toBe(true);
  expect(value.list).toEqual(expected.list);
  expect(value.date).toBeInstanceOf(Date);
  expect(value.date.getTime()).toBe(expected.date.getTime());
  expect(value.map).toBeInstanceOf(Map);
  expect([...value.map]).toEqual([...expected.map]);
  expect(value.set).toBeInstanceOf(Set);
  expect([...value.set]).toEqual([...expected.set]);
  expect(value.big).toBe(expected.big);
  expect([...(value.bytes as Uint8Array)]).toEqual([...expected.bytes]);
  expect(value.pattern).toBeInstanceOf(RegExp);
  expect(value.pattern.source).toBe('ab+c');
  expect(value.pattern.flags).toBe('gi');
}

describe('stored entry format v1', () => {
  it('decodes a value entry written with the v8 serializer', () => {
    const bytes = sample('entry-v8-value.v1.bin');
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 1, 1]);
    const entry = decodeEntry(bytes);
    expect(entry.kind).toBe(EntryKind.Value);
    expect(entry.createdAt).toBe(CREATED_AT);
    expect(entry.ttl).toBe(TTL);
    expect(entry.payload.length).toBe(bytes.length - HEADER_SIZE);
    expectV8Value(v8Serializer.deserialize(entry.payload) as ReturnType<typeof v8Value>);

    const stored = storeDecodes(new EntryCodec(v8Serializer), bytes);
    expect(stored).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL });
    expectV8Value(stored.value as ReturnType<typeof v8Value>);
  });

  it('decodes a value entry written with jsonSerializer, and a serializer without a name today writes the same bytes', () => {
    const bytes = sample('entry-json-value.v1.bin');
    const entry = decodeEntry(bytes);
    expect(entry.kind).toBe(EntryKind.Value);
    expect(entry.createdAt).toBe(CREATED_AT);
    expect(entry.ttl).toBe(TTL);
    expect(entry.payload.toString('utf8')).toBe(JSON.stringify(jsonValue()));
    expect(jsonSerializer.deserialize(entry.payload)).toEqual(jsonValue());
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, jsonSerializer.serialize(jsonValue())).equals(bytes)).toBe(true);

    const codec = new EntryCodec(jsonSerializer);
    expect(storeDecodes(codec, bytes)).toEqual({ kind: EntryKind.Value, value: jsonValue(), createdAt: CREATED_AT, ttl: TTL, stale: 0, delta: 0 });
    // jsonSerializer now names itself (version 4); one without a name writes version 1 as before.
    const unnamed = new EntryCodec({ serialize: jsonSerializer.serialize, deserialize: jsonSerializer.deserialize });
    expect(storeDecodes(unnamed, bytes)).toEqual(storeDecodes(codec, bytes));
    expect(unnamed.encode('k', { kind: EntryKind.Value, value: jsonValue(), createdAt: CREATED_AT, ttl: TTL }).equals(bytes)).toBe(true);
  });

  it('decodes a hit-for-miss marker, and today writes the same bytes', () => {
    const bytes = sample('entry-hit-for-miss.v1.bin');
    expect(bytes.length).toBe(HEADER_SIZE);
    const entry = decodeEntry(bytes);
    expect(entry.kind).toBe(EntryKind.HitForMiss);
    expect(entry.createdAt).toBe(CREATED_AT);
    expect(entry.ttl).toBe(MARKER_TTL);
    expect(entry.payload.length).toBe(0);
    expect(encodeEntry(EntryKind.HitForMiss, CREATED_AT, MARKER_TTL, Buffer.alloc(0)).equals(bytes)).toBe(true);

    // Whatever the serializer, the store reads and writes a marker without a payload.
    for (const serializer of [v8Serializer, jsonSerializer, portableSerializer]) {
      const codec = new EntryCodec(serializer);
      expect(storeDecodes(codec, bytes)).toEqual({ kind: EntryKind.HitForMiss, value: undefined, createdAt: CREATED_AT, ttl: MARKER_TTL, stale: 0, delta: 0 });
      expect(codec.encode('k', { kind: EntryKind.HitForMiss, value: undefined, createdAt: CREATED_AT, ttl: MARKER_TTL }).equals(bytes)).toBe(true);
    }
  });
});

describe('entries of the previous default (v8), read by the portable default', () => {
  it('decodes the v8 sample of format version 1 and 2 with the default codec', () => {
    const codec = new EntryCodec(portableSerializer);
    expectV8Value(storeDecodes(codec, sample('entry-v8-value.v1.bin')).value as ReturnType<typeof v8Value>);
    const v2 = storeDecodes(codec, sample('entry-v8-value.v2.bin'));
    expect(v2).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT });
    expectV8Value(v2.value as ReturnType<typeof v8Value>);
  });
});

describe('a rolling upgrade from the release whose default was v8', () => {
  it('v8 bytes without a name write exactly what that release wrote (version 1), and read it', () => {
    const bytes = sample('entry-v8-value.v1.bin');
    const codec = new EntryCodec({ ...v8Serializer, name: undefined });
    expect(codec.encode('k', { kind: EntryKind.Value, value: v8Value(), createdAt: CREATED_AT, ttl: TTL }).equals(bytes)).toBe(true);
    expectV8Value(storeDecodes(codec, bytes).value as ReturnType<typeof v8Value>);
  });
});

describe('stored entry format v4 (names its serializer)', () => {
  function expectPortableValue(value: ReturnType<typeof portableValue>): void {
    const { first, second, ...rest } = value;
    const { first: f, second: s, ...expected } = portableValue();
    expect(rest).toEqual(expected);
    expect(Object.is(value.negativeZero, -0)).toBe(true);
    expect('missing' in value && value.missing === undefined).toBe(true);
    expect(Buffer.isBuffer(value.bytes)).toBe(true);
    expect(value.floats).toBeInstanceOf(Float64Array);
    expect(first).toEqual(f);
    expect(second).toEqual(s);
    expect(first).toBe(second);
  }

  it('decodes an entry of portableSerializer field by field, and today writes the same bytes', () => {
    const bytes = sample('entry-portable-value.v4.bin');
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 4, 1]);
    const entry = decodeEntry(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: 0, delta: 0, serializer: 'portable' });
    expect(entry.tags).toBeUndefined();
    // The expiry where the lookup script reads it (bytes 12..19), as in versions 2 and 3.
    expect(bytes.readDoubleBE(12)).toBe(CREATED_AT + TTL);
    expect(bytes[HEADER_SIZE_V3]).toBe('portable'.length);
    expect(bytes.toString('latin1', HEADER_SIZE_V3 + 1, HEADER_SIZE_V3 + 9)).toBe('portable');
    expect(entry.payload[0]).toBe(0x01);
    expectPortableValue(portableSerializer.deserialize(entry.payload) as ReturnType<typeof portableValue>);

    const codec = new EntryCodec(portableSerializer);
    const stored = storeDecodes(codec, bytes);
    expectPortableValue(stored.value as ReturnType<typeof portableValue>);
    expect(codec.encode('k', { kind: EntryKind.Value, value: portableValue(), createdAt: CREATED_AT, ttl: TTL }).equals(bytes)).toBe(true);
  });

  it('decodes a tagged entry with a stale window, Δ and its own windows, and today writes the same bytes', () => {
    const bytes = sample('entry-portable-tagged.v4.bin');
    const entry = decodeEntry(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA, revalidate: 30_000, tags: TAGS, serializer: 'portable' });
    expect(entry.staleIfError).toBeUndefined();
    const codec = new EntryCodec(portableSerializer);
    const stored = storeDecodes(codec, bytes);
    expect(stored).toMatchObject({ createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA, revalidate: 30_000, tags: TAGS });
    expectPortableValue(stored.value as ReturnType<typeof portableValue>);
    const again = codec.encode('k', { kind: EntryKind.Value, value: portableValue(), createdAt: CREATED_AT, ttl: TTL, stale: STALE, delta: DELTA, revalidate: 30_000, tags: TAGS });
    expect(again.equals(bytes)).toBe(true);
  });

  it('is read by a process of another built-in serializer; one it cannot read is an UnknownSerializerError, not a corrupt value', () => {
    const bytes = sample('entry-portable-value.v4.bin');
    expectPortableValue(storeDecodes(new EntryCodec(jsonSerializer), bytes).value as ReturnType<typeof portableValue>);
    expectPortableValue(storeDecodes(new EntryCodec({ name: 'other', serialize: () => Buffer.alloc(0), deserialize: () => 'never' }), bytes).value as ReturnType<typeof portableValue>);

    const other = new EntryCodec({ name: 'other', serialize: () => Buffer.from('x'), deserialize: () => 'x' });
    const written = other.encode('k', { kind: EntryKind.Value, value: 1, createdAt: CREATED_AT, ttl: TTL });
    const decoded = new EntryCodec(portableSerializer).decode(written);
    expect('error' in decoded && decoded.error).toBeInstanceOf(UnknownSerializerError);
    const error = (decoded as { error: UnknownSerializerError }).error;
    expect(error).toMatchObject({ code: 'E_UNKNOWN_SERIALIZER', written: 'other', own: 'portable', entry: { createdAt: CREATED_AT, ttl: TTL } });
    expect(error.message).toContain('"other"');
    expect(error.message).toContain('"portable"');
  });
});

describe('a compressed entry (format v4, its name field "portable;brotli")', () => {
  it('decodes field by field; its payload is the serializer\'s bytes compressed; every codec reads it, and the store writes the same header', () => {
    const bytes = sample('entry-portable-brotli.v4.bin');
    expect([...bytes.subarray(0, 4)]).toEqual([0xd0, 0x67, 4, 1]);
    expect(bytes.readDoubleBE(12)).toBe(CREATED_AT + TTL);
    expect(bytes[HEADER_SIZE_V3]).toBe('portable;brotli'.length);
    expect(bytes.toString('latin1', HEADER_SIZE_V3 + 1, HEADER_SIZE_V3 + 16)).toBe('portable;brotli');
    const entry = decodeEntry(bytes);
    expect(entry).toMatchObject({ kind: EntryKind.Value, createdAt: CREATED_AT, ttl: TTL, stale: 0, delta: 0, serializer: 'portable', compression: 'brotli' });
    const plain = portableSerializer.serialize(compressibleValue());
    expect(brotliDecompressSync(entry.payload).equals(plain)).toBe(true);
    expect(bytes.length).toBeLessThan(plain.length);

    for (const codec of [new EntryCodec(portableSerializer), new EntryCodec(jsonSerializer), new EntryCodec(portableSerializer, { threshold: 0, algorithm: 'gzip' })]) {
      expect(storeDecodes(codec, bytes).value).toEqual(compressibleValue());
    }
    const again = new EntryCodec(portableSerializer, { threshold: 1024, algorithm: 'brotli' }).encode('k', { kind: EntryKind.Value, value: compressibleValue(), createdAt: CREATED_AT, ttl: TTL });
    expect(again.subarray(0, HEADER_SIZE_V3 + 16).equals(bytes.subarray(0, HEADER_SIZE_V3 + 16))).toBe(true);
    expect(storeDecodes(new EntryCodec(portableSerializer), again).value).toEqual(compressibleValue());
  });
});

describe('stored HTTP response format v1', () => {
  it('decodes every field of a stored response, and today writes the same bytes', () => {
    const bytes = sample('response.v1.bin');
    expect([...bytes.subarray(0, 4)]).toEqual([0x44, 0x48, 1, 0]);
    const decoded = decodeResponse(bytes);
    const expected = response();
    expect(decoded.createdAt).toBe(CREATED_AT);
    expect(decoded.status).toBe(203);
    expect(decoded.headers).toEqual([
      ['content-type', 'application/json; charset=utf-8'],
      ['set-cookie', ['a=1; Path=/', 'b=2; HttpOnly']],
      ['etag', 'W/"12-abc"'],
      ['x-latin1', 'caf\u00e9'],
      ['vary', 'Accept-Encoding, X-Tenant, X-Missing'],
    ]);
    expect(decoded.vary).toEqual([
      ['accept-encoding', 'gzip, br'],
      ['x-tenant', 'acme'],
      ['x-missing', undefined],
    ]);
    expect(decoded.body.equals(expected.body)).toBe(true);
    expect(encodeResponse(expected).equals(bytes)).toBe(true);
  });
});
