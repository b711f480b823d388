/** The writer of the portable format (see typed-format.ts). */
import { Buffer } from 'node:buffer';
import { VERSION, T_UNDEFINED, T_NULL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STRING, T_ARRAY, T_OBJECT, T_DATE, T_MAP, T_SET, T_BIGINT, T_BUFFER, T_ARRAY_BUFFER, T_TYPED, T_REGEXP, T_REF, T_ERROR, TYPED_KINDS, INT_MAX } from './typed-tags.js';

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

/** `value` as bytes of the format; throws `UnsupportedValueError` for what it cannot hold. */
export function encodeTyped(value: unknown): Buffer {
  const w = new Writer();
  w.byte(VERSION);
  w.value(value);
  return w.buf.subarray(0, w.pos);
}

