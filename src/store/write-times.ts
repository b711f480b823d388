import type { ServerClock } from '../redis/server-clock.js';
import type { StoredEntry } from './types.js';

/** The most leads whose start this process remembers (a lead always ends in a commit; this only bounds a leak). */
const LEAD_STARTS_MAX = 10_000;

/**
 * The times a Redis backend's writes carry, all on the server's clock (the fleet's one clock):
 * when each lead of this process was taken (its value's run began after), when a value written
 * now began at the latest, and after when Redis refuses a write because its caller has given up.
 */
export class WriteTimes {
  /** When (on the server's clock) each lead of this process was taken, by token. */
  private readonly leadStarts = new Map<string, number>();

  /** `writeTimeout`: how long a caller waits for a write (the cache's `commandTimeout`); 0 for no limit. */
  constructor(
    private readonly clock: ServerClock,
    private readonly writeTimeout: number,
  ) {}

  /** Remembers when the lead of `token` was taken, for its commit. */
  leadTaken(token: string, at: number): void {
    if (this.leadStarts.size >= LEAD_STARTS_MAX) this.leadStarts.delete(this.leadStarts.keys().next().value!);
    this.leadStarts.set(token, at);
  }

  /**
   * When the run a commit of the lead `token` ends began, at the latest, as text: the lead's
   * start when this process took it, else `startedBefore(delta)`. The start is forgotten unless
   * `keep` (a commit the lead outlives).
   */
  commitStart(token: string, delta: number | undefined, keep: boolean): string {
    const started = this.leadStarts.get(token);
    if (!keep) this.leadStarts.delete(token);
    return started === undefined ? this.startedBefore(delta) : String(started);
  }

  /**
   * When a value written now began, at the latest: `delta` ms (its run, measured on this
   * process's monotonic clock) before the server's time, less the clock's uncertainty. '' when
   * nothing says (no duration).
   */
  startedBefore(delta: number | undefined): string {
    if (!delta) return '';
    return String(this.clock.now() - delta - this.clock.uncertainty);
  }

  /** The server's time after which a write sent now is refused (its caller has given up), as text; '' for none. */
  notAfter(): string {
    if (!(this.writeTimeout > 0) || !this.clock.known) return '';
    return String(this.clock.now() + this.writeTimeout - this.clock.uncertainty);
  }
}

/** `entry` as the server stamped it (created at, and Δ where the entry records one). */
export function stamped(entry: StoredEntry, createdAt: string, delta: string): void {
  const at = Number(createdAt);
  if (!(at > 0)) return;
  entry.createdAt = at;
  const d = Number(delta);
  if (entry.delta !== undefined && d > entry.delta) entry.delta = d;
}
