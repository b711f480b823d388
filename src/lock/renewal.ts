import { LockLostError } from '../shared/errors.js';

interface RenewalOptions {
  /** The lock's TTL in ms; renewal runs every ttl / 3. */
  ttl: number;
  /** Resets the lock's expiry; resolves false when the lock is no longer held. */
  extend: () => Promise<boolean>;
  /** Called once when the lock is found gone, or could not be renewed for a whole TTL. */
  onLost: (err: LockLostError) => void;
  /** The name or key, for error messages. */
  key: string;
}

/**
 * Keeps a held lock alive: renews it every TTL/3 on an unref'd timer, never runs two
 * renewals at once, and reports the loss of the lock exactly once. A failed renewal (Redis
 * unreachable) is retried on the next tick until a whole TTL has passed since the last
 * successful one; by then the lock has expired on the server, so it is reported lost. The
 * same holds for a renewal that is still waiting for its answer a whole TTL after the last
 * successful one. Every duration is measured on the monotonic clock (performance.now()), so a
 * step of the wall clock neither hides nor fakes the loss.
 */
export class Renewal {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private lastOk = performance.now();
  private stopped = false;

  constructor(private readonly options: RenewalOptions) {}

  start(): this {
    this.lastOk = performance.now();
    const interval = Math.max(1, Math.floor(this.options.ttl / 3));
    this.timer = setInterval(() => {
      if (!this.inFlight) {
        this.inFlight = this.tick().finally(() => (this.inFlight = undefined));
      } else if (performance.now() - this.lastOk >= this.options.ttl) {
        // A renewal that never answers (the client queues commands while Redis is unreachable,
        // and may retry them for many seconds) must not hide that the lock has expired by now.
        this.lose(this.notRenewedError(new Error('the last renewal has not been answered')));
      }
    }, interval);
    this.timer.unref();
    return this;
  }

  /** Records a successful extension made by someone else (e.g. an explicit `extend()`). */
  touch(): void {
    this.lastOk = performance.now();
  }

  /** Stops the timer and waits for a renewal that is already running. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  private async tick(): Promise<void> {
    const startedAt = performance.now();
    try {
      const held = await this.options.extend();
      if (this.stopped) return;
      if (held) {
        this.lastOk = startedAt;
        return;
      }
      this.lose(new LockLostError(`the lock "${this.options.key}" expired or was taken by another holder`, { key: this.options.key }));
    } catch (err) {
      if (this.stopped) return;
      if (performance.now() - this.lastOk >= this.options.ttl) this.lose(this.notRenewedError(err));
    }
  }

  private notRenewedError(cause: unknown): LockLostError {
    return new LockLostError(`the lock "${this.options.key}" could not be renewed for a whole TTL (${this.options.ttl} ms)`, {
      key: this.options.key,
      cause,
    });
  }

  private lose(err: LockLostError): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.options.onLost(err);
  }
}
