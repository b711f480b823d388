import { UnknownSerializerError } from '../shared/errors.js';
import type { EntryCodec } from './codec.js';
import { CorruptEntryError } from './entry.js';
import type { Outcome } from './types.js';

/**
 * A message of a key's channel (what a commit, a write or a delete announced: see
 * cache-scripts.ts), as the `Outcome` its listeners hear. The first byte says what it is.
 * A value carried inline is decoded only up to `inlineMax` bytes (this process's setting, the
 * bound its own writers inline under): a longer one is a `corrupt` outcome, never decoded, so
 * that a waiter reports it and reads the key from Redis, and an L1 copy stops being a hit.
 */
export function parseOutcome(message: Buffer, codec: EntryCodec, inlineMax: number): Outcome {
  switch (message[0]) {
    case 0x76: /* v: stored and inline */
    case 0x73: /* s: shared, not stored */ {
      if (message.length - 1 > inlineMax) {
        return { kind: 'corrupt', error: new CorruptEntryError(`a value of ${message.length - 1} bytes was announced inline on the key's channel, past inlineMax (${inlineMax}): not decoded, the key is read from Redis`) };
      }
      const decoded = codec.decode(message.subarray(1));
      if ('error' in decoded && decoded.error instanceof UnknownSerializerError) {
        // Another serializer's value: stored ('v'), as if too big to inline (waiters look it up); shared ('s'), a release.
        return message[0] === 0x76 ? { kind: 'stored', createdAt: decoded.error.entry?.createdAt ?? message.readDoubleBE(5) } : { kind: 'released' };
      }
      return 'error' in decoded ? { kind: 'corrupt', error: decoded.error } : { kind: 'value', entry: decoded, stored: message[0] === 0x76 };
    }
    case 0x56: /* V (+ created-at) */
      return message.length >= 9 ? { kind: 'stored', createdAt: message.readDoubleBE(1) } : { kind: 'stored' };
    case 0x64: /* d + time of the delete */
      return message.length >= 9 ? { kind: 'deleted', at: message.readDoubleBE(1) } : { kind: 'deleted', at: Number.POSITIVE_INFINITY };
    case 0x53: /* S */
      return { kind: 'shared' };
    case 0x65: /* e */ {
      try {
        const { name, message: text } = JSON.parse(message.subarray(1).toString('utf8')) as { name: string; message: string };
        return { kind: 'error', name: String(name), message: String(text) };
      } catch {
        return { kind: 'error', name: 'Error', message: 'the loader failed in another process' };
      }
    }
    case 0x75: /* u */
      return { kind: 'uncacheable' };
    default:
      return { kind: 'released' };
  }
}
