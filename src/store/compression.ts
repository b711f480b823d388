import * as zlib from 'node:zlib';
import { InvalidOptionError, SerializationError } from '../shared/errors.js';
import { byteCount, oneOf, switchOrTable, type Check, type OptionTable } from '../shared/option-table.js';
import { CorruptEntryError } from './entry.js';

/**
 * Compression of stored values. A value entry whose serializer's bytes are longer than
 * `threshold` is written with them compressed (when that makes them shorter), and names the
 * algorithm in its header (entry.ts): every process reads it whatever its own `compression`
 * setting, so long as its runtime has the algorithm.
 */
export type CompressionAlgorithm = 'zstd' | 'brotli' | 'gzip';

export interface CompressionOptions {
  /** Serializer bytes above this many are compressed. @default 1024 */
  threshold?: number;
  /** @default 'zstd' where the running Node has it (≥ 22.15 / 23.8), else 'brotli' */
  algorithm?: CompressionAlgorithm;
}

export interface ResolvedCompression {
  threshold: number;
  algorithm: CompressionAlgorithm;
}

const DEFAULT_COMPRESSION_THRESHOLD = 1024;

/**
 * The most bytes a compressed payload may decompress to: 16 MiB. Compressed bytes come from
 * outside the process (anyone who can write one key in Redis or publish on one channel), and a
 * few hundred of them can stand for gigabytes: decompression stops here (zlib's
 * `maxOutputLength`, for every algorithm), so reading an entry never allocates more, and an
 * entry past it is a corrupt entry (a miss, reported as `corrupt`). A value whose serialised
 * bytes are longer is written uncompressed, so every entry this library writes reads back.
 */
export const DECOMPRESSED_MAX_BYTES = 16 * 1024 * 1024;

type Codec = (bytes: Uint8Array) => Buffer;
interface ZstdZlib {
  zstdCompressSync?: (bytes: Uint8Array, options?: object) => Buffer;
  zstdDecompressSync?: (bytes: Uint8Array, options?: { maxOutputLength?: number }) => Buffer;
}

/** What every decompressor is given: output stops at the bound (a `RangeError`, ERR_BUFFER_TOO_LARGE, past it). */
const BOUNDED = { maxOutputLength: DECOMPRESSED_MAX_BYTES };

const z = zlib as unknown as ZstdZlib;

/** Brotli's quality for cache writes: its default (11) costs tens of ms per 100 KB for a few % of size. */
const BROTLI_QUALITY = 4;

/** Each algorithm's compressor and decompressor in this runtime (zstd only where Node has it). */
const CODECS = new Map<CompressionAlgorithm, { compress: Codec; decompress: Codec }>([
  [
    'brotli',
    {
      compress: (bytes) => zlib.brotliCompressSync(bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength } }),
      decompress: (bytes) => zlib.brotliDecompressSync(bytes, BOUNDED),
    },
  ],
  ['gzip', { compress: (bytes) => zlib.gzipSync(bytes), decompress: (bytes) => zlib.gunzipSync(bytes, BOUNDED) }],
]);
if (typeof z.zstdCompressSync === 'function' && typeof z.zstdDecompressSync === 'function') {
  const compress = z.zstdCompressSync;
  const decompress = z.zstdDecompressSync;
  CODECS.set('zstd', { compress: (bytes) => compress(bytes), decompress: (bytes) => decompress(bytes, BOUNDED) });
}

/** Whether the running runtime can compress and decompress with `algorithm`. */
export function hasAlgorithm(algorithm: CompressionAlgorithm): boolean {
  return CODECS.has(algorithm);
}

/** The algorithm of `compression: true`: zstd where the runtime has it, else brotli. */
export function defaultAlgorithm(): CompressionAlgorithm {
  return hasAlgorithm('zstd') ? 'zstd' : 'brotli';
}

/** An algorithm of `CompressionAlgorithm` that the running runtime has. */
const algorithmCheck: Check<CompressionAlgorithm> = (value, option) => {
  const algorithm = oneOf<CompressionAlgorithm>('zstd', 'brotli', 'gzip')(value, option);
  if (!hasAlgorithm(algorithm)) {
    throw new InvalidOptionError(option, `'${algorithm}' needs Node 22.15 / 23.8 or later (zlib.zstdCompressSync); this is ${process.version}: use 'brotli' or 'gzip'`);
  }
  return algorithm;
};

/** The fields of `compression: { ... }`, declared once. */
export const COMPRESSION_TABLE = {
  threshold: { default: DEFAULT_COMPRESSION_THRESHOLD, check: byteCount, shown: '`1024`', doc: 'serializer bytes above this many are compressed' },
  algorithm: { default: defaultAlgorithm(), check: algorithmCheck, shown: "`'zstd'` where the running Node has it, else `'brotli'`", doc: "`'zstd'`, `'brotli'` or `'gzip'`" },
} satisfies OptionTable<CompressionOptions>;

/**
 * The `compression` option's check: `true` for the defaults, `false` for none, or
 * `{ threshold, algorithm }` (`InvalidOptionError` naming `compression`,
 * `compression.threshold` or `compression.algorithm`).
 */
export const compressionCheck: Check<ResolvedCompression | undefined> = switchOrTable(COMPRESSION_TABLE);

/** The `compression` option, checked; undefined when off. */
export function resolveCompression(value: unknown): ResolvedCompression | undefined {
  return value === undefined ? undefined : compressionCheck(value, 'compression');
}

/**
 * `bytes` compressed with `algorithm` (one the runtime has: `resolveCompression` checked it), or
 * undefined when they are longer than `DECOMPRESSED_MAX_BYTES` (no reader would decompress them:
 * they are stored as they are).
 */
export function compress(algorithm: CompressionAlgorithm, bytes: Uint8Array): Buffer | undefined {
  if (bytes.byteLength > DECOMPRESSED_MAX_BYTES) return undefined;
  return CODECS.get(algorithm)!.compress(bytes);
}

/**
 * `bytes` decompressed with the algorithm an entry names, never to more than
 * `DECOMPRESSED_MAX_BYTES`: a `CorruptEntryError` saying so past it; a `SerializationError`
 * naming the algorithm when this runtime does not have it (an entry of a newer Node, or a name
 * this release does not know); whatever zlib throws for bytes that do not decompress.
 */
export function decompress(algorithm: string, bytes: Buffer): Buffer {
  const codec = CODECS.get(algorithm as CompressionAlgorithm);
  if (codec === undefined) {
    const why = algorithm === 'zstd' ? `this runtime (Node ${process.version}) has no zstd (Node 22.15 / 23.8 or later has)` : 'this release knows no such algorithm';
    throw new SerializationError(`the stored entry is compressed with "${algorithm}", which ${why}; give every process of the fleet an algorithm all of them have (compression.algorithm)`);
  }
  try {
    return codec.decompress(bytes);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new CorruptEntryError(`the entry's ${bytes.length} ${algorithm} bytes decompress to more than ${DECOMPRESSED_MAX_BYTES} bytes (DECOMPRESSED_MAX_BYTES); decompression stopped there`, { cause: error });
    }
    throw error;
  }
}
