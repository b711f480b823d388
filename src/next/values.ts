import { InvalidOptionError } from '../shared/errors.js';

/* What Next hands its handlers, checked where it enters, and the stream its 'use cache' entries carry. */

/** The kinds of value Next 15 and 16 store through `cacheHandler`. */
export const NEXT_VALUE_KINDS: ReadonlySet<string> = new Set(['APP_PAGE', 'APP_ROUTE', 'PAGES', 'FETCH', 'REDIRECT', 'IMAGE']);

/** A value of a seconds field of Next (`revalidate`, `expire`) in ms: `false` or absent is `fallback`. */
export function secondsToMs(seconds: unknown, fallback: number): number {
  if (seconds === false || seconds === undefined || seconds === null) return fallback;
  return typeof seconds === 'number' && Number.isFinite(seconds) ? Math.max(0, seconds * 1000) : fallback;
}

/** A stream read to its end, as one buffer. Rejects if the stream errors. */
export async function bufferStream(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** A new stream over a copy of `bytes` (each reader of an entry gets its own). */
export function streamOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  const copy = new Uint8Array(bytes);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (copy.byteLength > 0) controller.enqueue(copy);
      controller.close();
    },
  });
}

/** True for a web `ReadableStream` (Next's own, or another realm's). */
export function isReadableStream(value: unknown): value is ReadableStream<Uint8Array> {
  return value !== null && typeof value === 'object' && typeof (value as { getReader?: unknown }).getReader === 'function';
}

/** Refuses what is not a Next shape this entry knows (`InvalidOptionError` naming it and the Next versions supported). */
export function unknownShape(name: string, detail: string): InvalidOptionError {
  return new InvalidOptionError(name, `${detail}; dogpile-guard/next supports the handler interfaces of Next.js 15.5 and 16`);
}

/** The tags a list field of Next holds (non-empty strings), or none. */
export function tagList(value: unknown): string[] {
  if (typeof value === 'string') return value === '' ? [] : value.split(',').filter((t) => t !== '');
  if (!Array.isArray(value)) return [];
  return value.filter((t): t is string => typeof t === 'string' && t !== '');
}
