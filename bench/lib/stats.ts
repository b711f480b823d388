/** Percentile (0–100) of a list of numbers, nearest-rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

/** "median [min–max]" with `digits` decimals. */
export function summary(values: number[], digits = 1): string {
  if (values.length === 0) return 'n/a';
  const f = (v: number) => v.toFixed(digits);
  if (values.length === 1) return f(values[0]!);
  return `${f(median(values))} [${f(Math.min(...values))}–${f(Math.max(...values))}]`;
}

/** "a / b" as a ratio string like "3.2×". */
export function ratio(a: number, b: number, digits = 2): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return 'n/a';
  return `${(a / b).toFixed(digits)}×`;
}

/** Sum of `calls` over `cmdstat_*` in `INFO commandstats` output. */
export function totalCommands(info: string): number {
  let total = 0;
  for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) total += Number(m[2]);
  return total;
}

/** Calls per command from `INFO commandstats`. */
export function commandCounts(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

/** "1 run × 150, 2 runs × 50": how many rounds had each number of loader runs. */
export function histogram(runs: number[]): string {
  const counts = new Map<number, number>();
  for (const n of runs) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts]
    .sort((a, b) => a[0] - b[0])
    .map(([n, c]) => `${n} run${n === 1 ? '' : 's'} × ${c}`)
    .join(', ');
}
