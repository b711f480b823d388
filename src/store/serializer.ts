import { serialize as v8Serialize, deserialize as v8Deserialize } from 'node:v8';
import { decodeTyped, encodeTyped } from './typed-format.js';

/**
 * Turns values into bytes for the shared store and back. Every entry names the serializer that
 * wrote it (`name`): a process reads entries of its own serializer and of the built-in ones it
 * can read here, and meets any other as a value it cannot read (a `corrupt` event with an
 * `UnknownSerializerError`, once per key; it loads for its own callers and leaves the entry
 * alone). A serializer without a name writes entries that name none (read with whatever
 * serializer the reader has).
 */
export interface Serializer {
  /**
   * Written into every entry (1 to 64 characters of `[A-Za-z0-9._:@/+-]`), so that a process
   * with another serializer can tell an entry it cannot read from a corrupt one.
   */
  readonly name?: string;
  serialize(value: unknown): Uint8Array;
  deserialize(bytes: Buffer): unknown;
}

/** True in Bun, whose `node:v8` writes JavaScriptCore's format rather than V8's. */
const onBun = typeof (globalThis as { Bun?: unknown }).Bun !== 'undefined';

/**
 * The default: values every runtime of a fleet reads alike (Node 20+, Bun, Deno) — objects,
 * arrays, strings, numbers (including -0, NaN, ±Infinity), booleans, `null`, `undefined` (also
 * inside objects and arrays), `Date`, `Map`, `Set`, `bigint`, `Buffer`, typed arrays,
 * `ArrayBuffer`, `DataView`, `RegExp`, `Error` (name, message, stack), and shared or cyclic
 * references. Class instances come back as plain objects (their own enumerable properties);
 * functions, symbols and promises cannot be stored (a `SerializationError` names the key).
 * It reads the entries of the previous default (`v8Serializer`) too, where the runtime's
 * `node:v8` can.
 */
export const portableSerializer: Serializer = {
  name: 'portable',
  serialize: encodeTyped,
  deserialize: decodeTyped,
};

/**
 * Node's `v8.serialize` (V8's structured clone format): what `portableSerializer` keeps, and
 * host objects of Node. Node 20–26 and Deno read each other's entries; Bun's `node:v8` writes
 * JavaScriptCore's own format, so under Bun its entries are named `jsc` and the other runtimes
 * (and Bun, those of Node) cannot read them. For fleets of Node processes only.
 */
export const v8Serializer: Serializer = {
  name: onBun ? 'jsc' : 'v8',
  serialize: (value) => v8Serialize(value),
  deserialize: (bytes) => v8Deserialize(bytes) as unknown,
};

/** JSON: portable and readable, but Dates become strings and Map/Set/BigInt are not supported. */
export const jsonSerializer: Serializer = {
  name: 'json',
  serialize: (value) => Buffer.from(value === undefined ? '' : JSON.stringify(value), 'utf8'),
  deserialize: (bytes) => (bytes.length === 0 ? undefined : JSON.parse(bytes.toString('utf8'))),
};

/** The serializer of `createCache()` when none is given. */
export const defaultSerializer = portableSerializer;

/** The built-in serializers this process reads whatever its own (by name). */
const builtIns = new Map<string, Serializer>([portableSerializer, v8Serializer, jsonSerializer].map((s) => [s.name!, s]));

/** The serializer that reads entries named `name` here, or undefined when this process has none. */
export function readerFor(name: string, own: Serializer): Serializer | undefined {
  return own.name === name ? own : builtIns.get(name);
}

/**
 * The serializer that reads entries naming none (entry format versions 1 to 3, or written by
 * a serializer without a name): the reader's own, except for the default, whose predecessor
 * (`v8Serializer`) wrote them.
 */
export function legacyReaderFor(own: Serializer): Serializer {
  return own === portableSerializer ? v8Serializer : own;
}

const NAME = /^[A-Za-z0-9._:@/+-]{1,64}$/;

/** Whether `name` can be written into an entry. */
export function validSerializerName(name: unknown): name is string {
  return typeof name === 'string' && NAME.test(name);
}
