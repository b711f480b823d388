/** The reader of the portable format (see typed-format.ts). */
import type { Buffer } from 'node:buffer';
import { VERSION, T_UNDEFINED, T_NULL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STRING, T_ARRAY, T_OBJECT, T_DATE, T_MAP, T_SET, T_BIGINT, T_BUFFER, T_ARRAY_BUFFER, T_TYPED, T_REGEXP, T_REF, T_ERROR, TYPED_KINDS } from './typed-tags.js';

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

/** The value in `bytes`; throws for bytes this format did not write. */
export function decodeTyped(bytes: Buffer): unknown {
  if (bytes.length < 2 || bytes[0] !== VERSION) throw new RangeError('not a value of the portable format');
  const r = new Reader(bytes);
  const value = r.value();
  if (r.pos !== bytes.length) throw new RangeError('trailing bytes after the value');
  return value;
}

