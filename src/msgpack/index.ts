/**
 * `dogpile-guard/msgpack`: values stored as MessagePack, with `msgpackr` (an optional peer
 * dependency: install it to use this entry). msgpackr's structured-clone extensions keep
 * `Date`, `Map`, `Set`, `RegExp`, `Error`, typed arrays, `Buffer`, `bigint` and shared or
 * cyclic references; `-0` comes back as `0`. Entries are named `msgpack`: every process of the
 * fleet needs this serializer (the others meet its entries as values they cannot read).
 *
 *   import { msgpackSerializer } from 'dogpile-guard/msgpack';
 *   createCache({ redis, serializer: msgpackSerializer });
 */
import { Packr } from 'msgpackr';
import type { Serializer } from '../store/serializer.js';

const packr = new Packr({ structuredClone: true, useBigIntExtension: true });

export const msgpackSerializer: Serializer = {
  name: 'msgpack',
  serialize: (value) => packr.pack(value),
  deserialize: (bytes) => packr.unpack(bytes) as unknown,
};
