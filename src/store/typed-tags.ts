/** The tags of the portable format (see typed-format.ts): shared by its writer and its reader. */
export const VERSION = 0x01;

export const T_UNDEFINED = 0x00;
export const T_NULL = 0x01;
export const T_FALSE = 0x02;
export const T_TRUE = 0x03;
export const T_INT = 0x04;
export const T_FLOAT = 0x05;
export const T_STRING = 0x06;
export const T_ARRAY = 0x07;
export const T_OBJECT = 0x08;
export const T_DATE = 0x09;
export const T_MAP = 0x0a;
export const T_SET = 0x0b;
export const T_BIGINT = 0x0c;
export const T_BUFFER = 0x0d;
export const T_ARRAY_BUFFER = 0x0e;
export const T_TYPED = 0x0f;
export const T_REGEXP = 0x10;
export const T_REF = 0x11;
export const T_ERROR = 0x12;

type TypedCtor = new (buffer: ArrayBuffer, byteOffset?: number, length?: number) => ArrayBufferView;

/** Typed array kinds by their byte in the format; the order is part of the format. */
export const TYPED_KINDS: TypedCtor[] = [
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

/** Integers in (-INT_MAX, INT_MAX) are written as varints. */
export const INT_MAX = 2 ** 31;
