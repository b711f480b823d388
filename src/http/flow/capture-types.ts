import type { OutgoingHttpHeaders } from 'node:http';
import type { StoreDecision } from '../../core/cache.js';

/* The shapes a capture deals in, apart from the capture itself (plan-types and capture both use them). */

/** A captured response to share: its stored-response bytes, and what the cache does with them. */
export interface SharedResponse {
  bytes: Buffer;
  /** Stored with its own lifetime, or `'share'`: handed to the requests waiting now, not stored by the cache (written otherwise, or not at all). */
  decision: StoreDecision | 'share';
}

/** What the functions that feed a capture use of it, whatever the value it settles with. */
export interface CaptureSink {
  readonly settled: boolean;
  readonly clientLeft: boolean;
  original?: { status: number; headers: OutgoingHttpHeaders };
  push(chunk: unknown, encoding?: BufferEncoding): void;
  complete(status: number, headers: OutgoingHttpHeaders): void;
  broken(): void;
  clientGone(): void;
  /** Settles with nothing to share. */
  share(value: null): void;
}
