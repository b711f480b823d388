import { serialize as v8Serialize, deserialize as v8Deserialize } from 'node:v8';

/**
 * Turns values into bytes for the shared store and back. The default (`v8Serializer`)
 * round-trips objects, arrays, strings, numbers, `null`, `undefined`, `Date`, `Map`, `Set`,
 * `BigInt`, `RegExp`, `Buffer`/typed arrays and cyclic structures. Its limits: class
 * instances come back as plain objects (no prototype), functions and symbols cannot be
 * stored (a `SerializationError` names the key), and a process on an older Node version may
 * not read what a newer one wrote (it is then treated as a miss and reported as `corrupt`).
 * Pass `jsonSerializer` or your own for a portable format.
 */
export interface Serializer {
  serialize(value: unknown): Uint8Array;
  deserialize(bytes: Buffer): unknown;
}

export const v8Serializer: Serializer = {
  serialize: (value) => v8Serialize(value),
  deserialize: (bytes) => v8Deserialize(bytes) as unknown,
};

/** JSON: portable and readable, but Dates become strings and Map/Set/BigInt are not supported. */
export const jsonSerializer: Serializer = {
  serialize: (value) => Buffer.from(value === undefined ? '' : JSON.stringify(value), 'utf8'),
  deserialize: (bytes) => (bytes.length === 0 ? undefined : JSON.parse(bytes.toString('utf8'))),
};
