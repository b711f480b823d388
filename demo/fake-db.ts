/**
 * A stand-in for a slow database. Every query takes `latencyMs`; at most `poolSize` run at
 * once and the others queue for a connection, as they would behind a real connection pool
 * (pg's default pool has 10). Queries are counted per label, so one process can serve
 * several demo routes and say how often each one reached the database.
 */
export class FakeDatabase {
  private readonly counts = new Map<string, number>();
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    readonly latencyMs: number,
    /** Connections in the pool; 0 = unlimited. */
    readonly poolSize: number,
  ) {}

  /** Runs one "query" labelled `label` and returns what `result` makes of it. */
  async query<T>(label: string, result: () => T): Promise<T> {
    this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
    await this.connection();
    try {
      await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
      return result();
    } finally {
      this.release();
    }
  }

  /** Queries made so far under `label`. */
  queries(label: string): number {
    return this.counts.get(label) ?? 0;
  }

  /** Every label's count. */
  allQueries(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }

  private connection(): Promise<void> {
    if (this.poolSize === 0 || this.active < this.poolSize) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.queue.push(resolve));
  }

  private release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.active--;
  }
}
