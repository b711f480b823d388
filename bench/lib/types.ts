export interface BenchContext {
  /** BENCH_QUICK=1: fewer repeats, for a smoke run. */
  quick: boolean;
  /** Progress output. */
  log: (msg: string) => void;
}

/** A benchmark module: runs, and returns its section of RESULTS.md (markdown). */
export interface BenchModule {
  default: (ctx: BenchContext) => Promise<string>;
}
