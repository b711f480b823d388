/**
 * `dogpile-guard/msgpack`: values stored as MessagePack, with `msgpackr` (an optional peer
 * dependency: install it to use this entry). msgpackr's structured-clone extensions keep
 * `Date`, `Map`, `Set`, `RegExp`, `Error`, typed arrays, `Buffer`, `bigint` and shared or
 * cyclic references; `-0` comes back as `0`. An own `__proto__` property (what `JSON.parse`
 * makes of a `"__proto__"` key) of an object literal, an array's, a `Map`'s or a `Set`'s object
 * comes back as an own property, in its place, and sets no prototype. Entries are named
 * `msgpack`: every process of the fleet needs this serializer (the others meet its entries as
 * values they cannot read).
 *
 *   import { msgpackSerializer } from 'dogpile-guard/msgpack';
 *   createCache({ redis, serializer: msgpackSerializer });
 */
import { Packr } from 'msgpackr';
import type { Serializer } from '../core/options.js';

const packr = new Packr({ structuredClone: true, useBigIntExtension: true });

/*
 * msgpackr reads a `__proto__` key back as `__proto_` (so that decoding never sets a
 * prototype), which would turn such a property into another one. A value whose bytes hold the
 * text `__proto__` anywhere (rare: one search of the packed bytes tells) is written instead as
 * the byte 0xC1, which MessagePack never uses, followed by `[copy, escaped]`: in `copy`, every
 * key `__proto__`, `__proto__$`, `__proto__$$`… of a plain object gains a `$`, and `escaped`
 * lists the objects whose keys were changed (references into `copy`, which the structured
 * clone keeps), so reading takes that `$` off theirs and no other object's. Every other value
 * is plain MessagePack, as before.
 */
const MARKED = 0xc1;
const PROTO_TEXT = Buffer.from('__proto__', 'latin1');
const ESCAPABLE = /^__proto__\$*$/;
const ESCAPED = /^__proto__\$+$/;

export const msgpackSerializer: Serializer = {
  name: 'msgpack',
  serialize(value) {
    const bytes = packr.pack(value);
    if (bytes.indexOf(PROTO_TEXT) === -1) return bytes;
    const escaped: object[] = [];
    const copy = escapeKeys(value, new Map(), escaped);
    if (escaped.length === 0) return bytes;
    const marked = packr.pack([copy, escaped]);
    const out = Buffer.allocUnsafe(marked.length + 1);
    out[0] = MARKED;
    out.set(marked, 1);
    return out;
  },
  deserialize(bytes) {
    if (bytes[0] !== MARKED) return packr.unpack(bytes) as unknown;
    const decoded = packr.unpack(bytes.subarray(1)) as unknown;
    if (!Array.isArray(decoded) || decoded.length !== 2 || !Array.isArray(decoded[1])) throw new TypeError('not a msgpack value with escaped __proto__ keys');
    for (const object of decoded[1] as unknown[]) {
      if (typeof object !== 'object' || object === null) throw new TypeError('not a msgpack value with escaped __proto__ keys');
      rekey(object, (key) => (ESCAPED.test(key) ? key.slice(0, -1) : key));
    }
    return decoded[0];
  },
};

/** A plain object: an object literal, `Object.create(null)`, or one of another realm. */
function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * `value` with every plain object, array, `Map` and `Set` copied (shared and cyclic references
 * kept, through `seen`) and the keys of plain objects escaped; other objects (instances msgpackr
 * encodes by its extensions, or as their own fields) are kept as they are.
 */
function escapeKeys(value: unknown, seen: Map<object, unknown>, escaped: object[]): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const done = seen.get(value);
  if (done !== undefined) return done;
  if (Array.isArray(value) && value.constructor === Array) {
    const copy: unknown[] = new Array<unknown>(value.length);
    seen.set(value, copy);
    for (let i = 0; i < value.length; i++) copy[i] = escapeKeys(value[i], seen, escaped);
    return copy;
  }
  if (value.constructor === Map) {
    const copy = new Map<unknown, unknown>();
    seen.set(value, copy);
    for (const [k, v] of value as Map<unknown, unknown>) copy.set(escapeKeys(k, seen, escaped), escapeKeys(v, seen, escaped));
    return copy;
  }
  if (value.constructor === Set) {
    const copy = new Set<unknown>();
    seen.set(value, copy);
    for (const member of value as Set<unknown>) copy.add(escapeKeys(member, seen, escaped));
    return copy;
  }
  if (!isPlain(value)) return value;
  const copy = Object.create(Object.getPrototypeOf(value) as object | null) as Record<string, unknown>;
  seen.set(value, copy);
  let changed = false;
  for (const key of Object.keys(value)) {
    const escapedKey = ESCAPABLE.test(key) ? `${key}$` : key;
    if (escapedKey !== key) changed = true;
    define(copy, escapedKey, escapeKeys((value as Record<string, unknown>)[key], seen, escaped));
  }
  if (changed) escaped.push(copy);
  return copy;
}

/** Renames the own keys of `object` in place, keeping their order. */
function rekey(object: object, rename: (key: string) => string): void {
  const record = object as Record<string, unknown>;
  const entries = Object.keys(record).map((key) => [rename(key), record[key]] as const);
  for (const key of Object.keys(record)) delete record[key];
  for (const [key, value] of entries) define(record, key, value);
}

/** An own data property, also for `__proto__` (an assignment would set the prototype). */
function define(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
}
