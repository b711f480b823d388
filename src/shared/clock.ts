/**
 * The monotonic clock every wait, deadline and timeout is measured on (never steps back or
 * jumps with the wall clock). `Date.now()` is only for timestamps that are stored or shown.
 */
export function monotonicNow(): number {
  return performance.now();
}
