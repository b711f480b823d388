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

export { encodeTyped, UnsupportedValueError } from './typed-writer.js';
export { decodeTyped } from './typed-reader.js';
