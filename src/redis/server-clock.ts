import { monotonicNow } from '../shared/clock.js';
import type { CommandClient } from './client.js';

/** A reading older than this is taken again (the monotonic clock and the server's drift apart by parts per million). */
const RESAMPLE_MS = 30_000;

/**
 * The Redis server's clock, as this process can read it without a round trip: the server's
 * `TIME` is sampled, and carried forward on this process's monotonic clock. Every decision that
 * compares times written by different processes (is a stored entry still fresh, when did it
 * start, which copy is newer) reads this clock, so the processes' own wall clocks may disagree
 * by any amount without effect. The scripts that write entries, deletes and tag stamps take
 * `TIME` on the server itself; this estimate is only for reading.
 *
 * `now()` is off from the server's clock by at most `uncertainty` ms (half the round trip of
 * the sample, as long as the server's clock does not step).
 */
export class ServerClock {
  /** Server ms minus monotonic ms, once sampled. */
  private offset: number | undefined;
  private sampledAt = Number.NEGATIVE_INFINITY;
  private sampling: Promise<void> | undefined;
  /** No new sample before then (monotonic ms) after a failed one. */
  private nextTry = 0;
  /** Half the round trip of the sample in use (ms). */
  uncertainty = 0;

  constructor(private readonly commands: Pick<CommandClient, 'call'>) {}

  /** True once the server's clock has been read. */
  get known(): boolean {
    return this.offset !== undefined;
  }

  /**
   * The server's time now, in ms since the epoch (fractional). Before the first reading it
   * is this process's wall clock; `ready()` waits for the first reading.
   */
  now(): number {
    const mono = monotonicNow();
    if (mono - this.sampledAt > RESAMPLE_MS && mono >= this.nextTry) void this.sample().catch(() => {});
    return this.offset === undefined ? performance.timeOrigin + mono : mono + this.offset;
  }

  /** Resolves once the server's clock has been read (at once when it has; a failed read leaves the estimate as it was). */
  ready(): Promise<void> {
    if (this.offset !== undefined) return Promise.resolve();
    return this.sample().catch(() => {});
  }

  /**
   * A reading of the server's clock that arrived with a reply: `serverMs` read between `sentAt`
   * and `receivedAt` (monotonic ms). Kept when it is at least as tight as the one in use, or
   * when that one is old.
   */
  observe(serverMs: number, sentAt: number, receivedAt: number): void {
    const half = (receivedAt - sentAt) / 2;
    if (!Number.isFinite(serverMs) || half < 0) return;
    if (this.offset !== undefined && half > this.uncertainty && receivedAt - this.sampledAt < RESAMPLE_MS) return;
    this.offset = serverMs - (sentAt + half);
    this.uncertainty = half;
    this.sampledAt = receivedAt;
  }

  private sample(): Promise<void> {
    this.sampling ??= (async () => {
      try {
        const sentAt = monotonicNow();
        const reply = (await this.commands.call('TIME')) as [string | number, string | number];
        this.observe(Number(reply[0]) * 1000 + Number(reply[1]) / 1000, sentAt, monotonicNow());
      } catch (error) {
        // Redis unreachable: the estimate in use stays; the next try is a second away.
        this.nextTry = monotonicNow() + 1000;
        throw error;
      } finally {
        this.sampling = undefined;
      }
    })();
    return this.sampling;
  }
}
