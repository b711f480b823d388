/**
 * The bytes of `portableSerializer`: a small tagged binary encoding that every runtime reads
 * alike (Node, Bun, Deno), since it is written and read by this code alone — no engine's own
 * wire format. Version byte first (0x01; V8's format starts with 0xFF, so the two are never
 * confused), then one value:
 *
 *   0x00 undefined   0x01 null   0x02 false   0x03 true
 *   0x04 integer: zigzag varint (safe integers up to ±2^31)
 *   0x05 number: float64 LE (any other number: fractions, -0, NaN, ±Infinity, large integers)
 *   0x06 string: varint UTF-8 byte length, bytes
 *   0x07 array: varint length, items (holes read back as undefined)
 *   0x08 object: varint count, then per own enumerable string key: key (varint length, UTF-8), value
 *   0x09 Date: float64 LE (ms since the epoch; NaN for an invalid date)
 *   0x0A Map: varint count, key, value ...      0x0B Set: varint count, items
 *   0x0C bigint: sign byte (0 | 1), varint length, magnitude as hex text
 *   0x0D Buffer: varint length, bytes (read back as a view of the bytes decoded, not a copy)
 *   0x0E ArrayBuffer: varint length, bytes
 *   0x0F typed array or DataView: kind byte (TYPED_KINDS), varint byte length, bytes (little-endian)
 *   0x10 RegExp: source, flags (each: varint length, UTF-8)
 *   0x11 a reference to the n-th object or array met so far (varint n): shared and cyclic structures
 *   0x12 Error: name, message, stack (each: varint length, UTF-8; stack empty when absent)
 *
 * Class instances are written as their own enumerable properties (read back as plain objects);
 * functions and symbols cannot be written.
 */

import { Buffer } from 'node:buffer';

const VERSION = 0x01;

const T_UNDEFINED = 0x00;
const T_NULL = 0x01;
const T_FALSE = 0x02;
const T_TRUE = 0x03;
const T_INT = 0x04;
const T_FLOAT = 0x05;
const T_STRING = 0x06;
const T_ARRAY = 0x07;
const T_OBJECT = 0x08;
const T_DATE = 0x09;
const T_MAP = 0x0a;
const T_SET = 0x0b;
const T_BIGINT = 0x0c;
const T_BUFFER = 0x0d;
const T_ARRAY_BUFFER = 0x0e;
const T_TYPED = 0x0f;
const T_REGEXP = 0x10;
const T_REF = 0x11;
const T_ERROR = 0x12;

type TypedCtor = new (buffer: ArrayBuffer, byteOffset?: number, length?: number) => ArrayBufferView;

/** Typed array kinds by their byte in the format; the order is part of the format. */
const TYPED_KINDS: TypedCtor[] = [
  Uint8Array,
  Int8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
];

const INT_MAX = 2 ** 31;

/** Raised for a value the format cannot hold; the codec turns it into a `SerializationError`. */
export class UnsupportedValueError extends TypeError {}

class Writer {
  buf: Buffer = Buffer.allocUnsafe(256);
  pos = 0;
  /** Objects and arrays met so far, by the order they were met (references, cycles). */
  seen: Map<object, number> | undefined;
  count = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    // Doubling for small steps; a large write (bytes, a long string) gets its room at once.
    const size = Math.max(this.buf.length * 2, this.pos + n + 256);
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b;
  }

  varint(n: number): void {
    this.ensure(5);
    while (n >= 0x80) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    this.buf[this.pos++] = n;
  }

  float(n: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(n, this.pos);
    this.pos += 8;
  }

  text(s: string): void {
    const length = s.length;
    if (length < 64) {
      // Short ASCII text, byte by byte (the common case of keys); anything else goes to the UTF-8 writer.
      this.ensure(length + 1);
      const start = this.pos;
      this.buf[start] = length;
      let at = start + 1;
      let i = 0;
      for (; i < length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        this.buf[at++] = c;
      }
      if (i === length) {
        this.pos = at;
        return;
      }
    }
    this.ensure(length * 3 + 5);
    // The length first (as a 5-byte-wide placeholder would waste space): measure, then write.
    const bytes = Buffer.byteLength(s, 'utf8');
    this.varint(bytes);
    this.buf.write(s, this.pos, bytes, 'utf8');
    this.pos += bytes;
  }

  raw(bytes: Uint8Array): void {
    this.varint(bytes.byteLength);
    this.ensure(bytes.byteLength);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.byteLength;
  }

  /** True when `o` was written before (a reference to it is written instead). */
  ref(o: object): boolean {
    const seen = (this.seen ??= new Map());
    const at = seen.get(o);
    if (at !== undefined) {
      this.byte(T_REF);
      this.varint(at);
      return true;
    }
    seen.set(o, this.count++);
    return false;
  }

  value(v: unknown): void {
    switch (typeof v) {
      case 'string':
        this.byte(T_STRING);
        this.text(v);
        return;
      case 'number':
        if (Number.isInteger(v) && v > -INT_MAX && v < INT_MAX && !Object.is(v, -0)) {
          this.byte(T_INT);
          this.varint(((v << 1) ^ (v >> 31)) >>> 0);
        } else {
          this.byte(T_FLOAT);
          this.float(v);
        }
        return;
      case 'boolean':
        this.byte(v ? T_TRUE : T_FALSE);
        return;
      case 'undefined':
        this.byte(T_UNDEFINED);
        return;
      case 'bigint': {
        this.byte(T_BIGINT);
        this.byte(v < 0n ? 1 : 0);
        this.text((v < 0n ? -v : v).toString(16));
        return;
      }
      case 'object':
        if (v === null) this.byte(T_NULL);
        else this.object(v);
        return;
      default:
        throw new UnsupportedValueError(`a ${typeof v} cannot be stored`);
    }
  }

  object(o: object): void {
    if (Array.isArray(o)) {
      if (this.ref(o)) return;
      this.byte(T_ARRAY);
      this.varint(o.length);
      for (let i = 0; i < o.length; i++) this.value(o[i]);
      return;
    }
    const proto = Object.getPrototypeOf(o) as unknown;
    if (proto === Object.prototype || proto === null) {
      if (this.ref(o)) return;
      this.plain(o as Record<string, unknown>);
      return;
    }
    if (o instanceof Date) {
      this.byte(T_DATE);
      this.float(o.getTime());
      return;
    }
    if (ArrayBuffer.isView(o)) {
      if (Buffer.isBuffer(o)) {
        this.byte(T_BUFFER);
        this.raw(o);
        return;
      }
      const kind = TYPED_KINDS.findIndex((ctor) => o instanceof ctor);
      if (kind < 0) throw new UnsupportedValueError(`a ${o.constructor.name} cannot be stored`);
      this.byte(T_TYPED);
      this.byte(kind);
      this.raw(new Uint8Array(o.buffer, o.byteOffset, o.byteLength));
      return;
    }
    if (this.ref(o)) return;
    if (o instanceof Map) {
      this.byte(T_MAP);
      this.varint(o.size);
      for (const [k, val] of o) {
        this.value(k);
        this.value(val);
      }
      return;
    }
    if (o instanceof Set) {
      this.byte(T_SET);
      this.varint(o.size);
      for (const item of o) this.value(item);
      return;
    }
    if (o instanceof ArrayBuffer) {
      this.byte(T_ARRAY_BUFFER);
      this.raw(new Uint8Array(o));
      return;
    }
    if (o instanceof RegExp) {
      this.byte(T_REGEXP);
      this.text(o.source);
      this.text(o.flags);
      return;
    }
    if (o instanceof Error) {
      this.byte(T_ERROR);
      this.text(o.name);
      this.text(o.message);
      this.text(o.stack ?? '');
      return;
    }
    if (typeof (o as { then?: unknown }).then === 'function') throw new UnsupportedValueError('a Promise (or thenable) cannot be stored; await it first');
    if (o instanceof WeakMap || o instanceof WeakSet || (typeof SharedArrayBuffer === 'function' && o instanceof SharedArrayBuffer)) throw new UnsupportedValueError(`a ${o.constructor.name} cannot be stored`);
    this.plain(o as Record<string, unknown>);
  }

  plain(o: Record<string, unknown>): void {
    const keys = Object.keys(o);
    this.byte(T_OBJECT);
    this.varint(keys.length);
    for (const k of keys) {
      this.text(k);
      this.value(o[k]);
    }
  }
}

/** Short ASCII strings decoded lately, by a hash of their bytes: a name met again is not built again. */
const KEYS: (string | undefined)[] = new Array<string | undefined>(4096);

function sameAscii(text: string, buf: Buffer, at: number): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) !== buf[at + i]) return false;
  return true;
}

class Reader {
  pos = 1;
  readonly refs: object[] = [];
  constructor(readonly buf: Buffer) {}

  need(n: number): void {
    if (this.pos + n > this.buf.length) throw new RangeError('truncated value');
  }

  byte(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }

  varint(): number {
    let n = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      n += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return n;
      shift += 7;
      if (shift > 35) throw new RangeError('bad length');
    }
  }

  float(): number {
    this.need(8);
    const n = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return n;
  }

  text(): string {
    const length = this.varint();
    this.need(length);
    const start = this.pos;
    this.pos += length;
    const end = start + length;
    if (length <= 16) {
      // Short ASCII text (property names, mostly): one copy per name kept in KEYS, by a hash of its bytes.
      let hash = length;
      for (let i = start; i < end; i++) {
        const c = this.buf[i]!;
        if (c >= 0x80) return this.buf.toString('utf8', start, end);
        hash = (hash * 31 + c) | 0;
      }
      const slot = hash & (KEYS.length - 1);
      const known = KEYS[slot];
      if (known !== undefined && known.length === length && sameAscii(known, this.buf, start)) return known;
      const text = this.buf.toString('latin1', start, end);
      KEYS[slot] = text;
      return text;
    }
    return this.buf.toString('utf8', start, end);
  }

  /** A copy of the next `varint` bytes, in memory of their own (aligned for any typed array). */
  bytes(): ArrayBuffer {
    const length = this.varint();
    this.need(length);
    const out = new ArrayBuffer(length);
    new Uint8Array(out).set(this.buf.subarray(this.pos, this.pos + length));
    this.pos += length;
    return out;
  }

  value(): unknown {
    const tag = this.byte();
    switch (tag) {
      case T_UNDEFINED:
        return undefined;
      case T_NULL:
        return null;
      case T_FALSE:
        return false;
      case T_TRUE:
        return true;
      case T_INT: {
        const z = this.varint();
        return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
      }
      case T_FLOAT:
        return this.float();
      case T_STRING:
        return this.text();
      case T_ARRAY: {
        const length = this.varint();
        if (length > this.buf.length - this.pos) throw new RangeError('bad array length');
        const out: unknown[] = new Array<unknown>(length);
        this.refs.push(out);
        for (let i = 0; i < length; i++) out[i] = this.value();
        return out;
      }
      case T_OBJECT: {
        const count = this.varint();
        const out: Record<string, unknown> = {};
        this.refs.push(out);
        for (let i = 0; i < count; i++) {
          const k = this.text();
          const v = this.value();
          if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
          else out[k] = v;
        }
        return out;
      }
      case T_DATE:
        return new Date(this.float());
      case T_MAP: {
        const count = this.varint();
        const out = new Map<unknown, unknown>();
        this.refs.push(out);
        for (let i = 0; i < count; i++) {
          const k = this.value();
          out.set(k, this.value());
        }
        return out;
      }
      case T_SET: {
        const count = this.varint();
        const out = new Set<unknown>();
        this.refs.push(out);
        for (let i = 0; i < count; i++) out.add(this.value());
        return out;
      }
      case T_BIGINT: {
        const negative = this.byte() === 1;
        const magnitude = BigInt(`0x${this.text()}`);
        return negative ? -magnitude : magnitude;
      }
      case T_BUFFER: {
        const length = this.varint();
        this.need(length);
        // A view of the bytes read (no copy): they belong to this value alone once decoded.
        const out = this.buf.subarray(this.pos, this.pos + length);
        this.pos += length;
        return out;
      }
      case T_ARRAY_BUFFER: {
        const out = this.bytes();
        this.refs.push(out);
        return out;
      }
      case T_TYPED: {
        const Ctor = TYPED_KINDS[this.byte()];
        if (!Ctor) throw new RangeError('unknown typed array kind');
        const memory = this.bytes();
        if (Ctor === DataView) return new DataView(memory);
        const size = (Ctor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
        if (memory.byteLength % size !== 0) throw new RangeError('bad typed array length');
        return new Ctor(memory, 0, memory.byteLength / size);
      }
      case T_REGEXP: {
        const source = this.text();
        const out = new RegExp(source, this.text());
        this.refs.push(out);
        return out;
      }
      case T_REF: {
        const at = this.varint();
        const out = this.refs[at];
        if (out === undefined) throw new RangeError('bad reference');
        return out;
      }
      case T_ERROR: {
        const name = this.text();
        const error = new Error(this.text());
        error.name = name;
        const stack = this.text();
        if (stack) error.stack = stack;
        this.refs.push(error);
        return error;
      }
      default:
        throw new RangeError(`unknown tag 0x${tag.toString(16)}`);
    }
  }
}

/** `value` as bytes of the format; throws `UnsupportedValueError` for what it cannot hold. */
export function encodeTyped(value: unknown): Buffer {
  const w = new Writer();
  w.byte(VERSION);
  w.value(value);
  return w.buf.subarray(0, w.pos);
}

/** The value in `bytes`; throws for bytes this format did not write. */
export function decodeTyped(bytes: Buffer): unknown {
  if (bytes.length < 2 || bytes[0] !== VERSION) throw new RangeError('not a value of the portable format');
  const r = new Reader(bytes);
  const value = r.value();
  if (r.pos !== bytes.length) throw new RangeError('trailing bytes after the value');
  return value;
}
