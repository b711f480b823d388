/**
 * Small helpers shared by the tests, their child processes and the benchmarks (this folder is
 * not published: package.json `files` is `dist` and the README).
 */

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let counter = 0;
/** A fresh id (unique across processes and runs), so every test starts cold: `label` + pid + time + counter. */
export function freshId(label = 'r'): string {
  counter++;
  return `${label}${process.pid.toString(36)}${Date.now().toString(36)}${counter}`;
}

/**
 * Polls `check` until it returns something other than `undefined`/`false`, for at most
 * `timeoutMs` on the monotonic clock; rejects with `what` when the time is up.
 */
export async function waitUntil<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000, everyMs = 10): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result !== undefined && result !== false) return result;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
