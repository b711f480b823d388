/**
 * Byte-level pins of what the library stores: samples written by the encoders of the day the
 * format was introduced (test/fixtures/formats/*.bin, made by generate.ts there) must keep
 * decoding, field by field, with today's code. A failure here means stored data written by a
 * released version would no longer be read: bump the format version instead. Entries are
 * checked twice: field by field with the entry format (entry.ts), and through the store's own
 * encoding (`EntryCodec`, what the backends read and write).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EntryCodec } from '../src/store/codec.js';
import { decodeEntry, encodeEntry, EntryKind, HEADER_SIZE } from '../src/store/entry.js';
import { jsonSerializer, v8Serializer } from '../src/store/serializer.js';
import type { StoredEntry } from '../src/store/types.js';
import { decodeResponse, encodeResponse } from '../src/http/response-format.js';
import { CREATED_AT, jsonValue, MARKER_TTL, response, TTL, v8Value } from './fixtures/formats/samples.js';

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

  it('decodes a value entry written with jsonSerializer, and today writes the same bytes', () => {
    const bytes = sample('entry-json-value.v1.bin');
    const entry = decodeEntry(bytes);
    expect(entry.kind).toBe(EntryKind.Value);
    expect(entry.createdAt).toBe(CREATED_AT);
    expect(entry.ttl).toBe(TTL);
    expect(entry.payload.toString('utf8')).toBe(JSON.stringify(jsonValue()));
    expect(jsonSerializer.deserialize(entry.payload)).toEqual(jsonValue());
    expect(encodeEntry(EntryKind.Value, CREATED_AT, TTL, jsonSerializer.serialize(jsonValue())).equals(bytes)).toBe(true);

    const codec = new EntryCodec(jsonSerializer);
    expect(storeDecodes(codec, bytes)).toEqual({ kind: EntryKind.Value, value: jsonValue(), createdAt: CREATED_AT, ttl: TTL });
    expect(codec.encode('k', { kind: EntryKind.Value, value: jsonValue(), createdAt: CREATED_AT, ttl: TTL }).equals(bytes)).toBe(true);
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
    for (const serializer of [v8Serializer, jsonSerializer]) {
      const codec = new EntryCodec(serializer);
      expect(storeDecodes(codec, bytes)).toEqual({ kind: EntryKind.HitForMiss, value: undefined, createdAt: CREATED_AT, ttl: MARKER_TTL });
      expect(codec.encode('k', { kind: EntryKind.HitForMiss, value: undefined, createdAt: CREATED_AT, ttl: MARKER_TTL }).equals(bytes)).toBe(true);
    }
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
