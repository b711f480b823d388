import { debug } from '../shared/diagnostics.js';
import { BackendError } from '../shared/errors.js';

/** An invalidation accepted while Redis was unreachable, to replay when it is back. */
export type Invalidation =
  | { kind: 'delete'; keys: readonly string[] }
  | { kind: 'tags'; tags: readonly string[]; stale: boolean }
  | { kind: 'clear'; stale: boolean };

/** What the queue needs of its cache. */
export interface RecoveryHost {
  /** Drops the copies process memory holds in front of Redis: of these keys, or all. */
  forget(keys?: readonly string[]): void;
  /** True when `error` says Redis is unusable (not an answer about one key, not bad input). */
  unreachable(error: unknown): boolean;
}

/**
 * `autoRecovery`: `delete`, `deleteMany`, `invalidateTags` and `clear` made while Redis is
 * unreachable are applied to this process's memory at once (the copies they concern are
 * dropped), kept in order in a bounded queue, and replayed in that order once Redis answers
 * again, each by the same script as the original call (so it is announced to every process);
 * a bulk one (`deleteMany`) chunk by chunk, each chunk with its own deadline: its `send` resumes
 * at the chunk that failed (see `deletion` in bulk.ts), so what landed is not sent again.
 * While anything is queued the cache does not read Redis (`held`): a value an invalidation
 * would remove is never read back before the invalidation lands; and a new write first replays
 * the queue, so writes reach Redis in the order they were made.
 */
export class RecoveryQueue {
  /** Each invalidation with what sends it to Redis (the call that queued it, made again). */
  private readonly queue: { invalidation: Invalidation; send: () => Promise<unknown> }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private draining: Promise<boolean> | undefined;
  private closed = false;

  constructor(
    private readonly host: RecoveryHost,
    /** The most invalidations kept; past it a new one is refused (rejects as without autoRecovery). */
    private readonly max: number,
    /** How long between replay attempts (the cache's `backendCooldown`). */
    private readonly retryMs: number,
  ) {}

  /** True while invalidations wait for Redis: reads and writes keep away from it until they land. */
  get held(): boolean {
    return this.queue.length > 0;
  }

  get size(): number {
    return this.queue.length;
  }

  /**
   * Sends `invalidation` (after anything queued before it). When Redis is unreachable, applies
   * it to process memory, queues it, and resolves with `queued`; other failures reject as usual.
   */
  async run<R>(invalidation: Invalidation, send: () => Promise<R>, queued: R): Promise<R> {
    if (this.queue.length > 0 && !(await this.drain())) return this.enqueue(invalidation, send, queued, undefined);
    try {
      return await send();
    } catch (error) {
      if (!this.host.unreachable(error)) throw error;
      return this.enqueue(invalidation, send, queued, error);
    }
  }

  /** Before a write that is not an invalidation: replays the queue; rejects when it cannot. */
  async before(): Promise<void> {
    if (this.queue.length === 0) return;
    if (!(await this.drain())) {
      throw new BackendError(`Redis is unreachable and ${this.queue.length} invalidation(s) made meanwhile wait to be replayed first (autoRecovery)`);
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.queue.length > 0 && debug.enabled) debug('autoRecovery: closed with %d invalidation(s) not replayed', this.queue.length);
    this.queue.length = 0;
  }

  private enqueue<R>(invalidation: Invalidation, send: () => Promise<unknown>, queued: R, error: unknown): R {
    if (this.queue.length >= this.max) {
      throw new BackendError(`Redis is unreachable and the autoRecovery queue is full (${this.max} invalidations, autoRecovery.maxQueue); this one was not accepted`, { cause: error });
    }
    this.host.forget(invalidation.kind === 'delete' ? invalidation.keys : undefined);
    this.queue.push({ invalidation, send });
    if (debug.enabled) debug('autoRecovery: Redis unreachable; %s queued (%d waiting)', invalidation.kind, this.queue.length);
    this.schedule();
    return queued;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drain().then((done) => {
        if (!done) this.schedule();
      });
    }, this.retryMs);
    this.timer.unref();
  }

  /** Replays the queue in order; true once it is empty. One replay at a time. */
  private drain(): Promise<boolean> {
    this.draining ??= (async () => {
      try {
        while (this.queue.length > 0 && !this.closed) {
          const head = this.queue[0]!;
          try {
            await head.send();
          } catch (error) {
            if (this.host.unreachable(error)) {
              // Next time from where it stopped (a bulk send resumes at the chunk that failed).
              return false;
            }
            // Redis answered and refused it (it concerns one key's contents): nothing to retry.
            if (debug.enabled) debug('autoRecovery: a queued %s was refused: %s', head.invalidation.kind, String(error));
          }
          this.queue.shift();
        }
        return this.queue.length === 0;
      } finally {
        this.draining = undefined;
      }
    })();
    return this.draining;
  }
}
