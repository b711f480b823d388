/**
 * Runs in every test worker: a test file that leaves timers, sockets or child processes
 * behind fails. Unhandled rejections already fail the run (vitest reports them as errors).
 */
import { afterAll, beforeAll } from 'vitest';

const WATCHED = new Set(['Timeout', 'TCPSocketWrap', 'TCPWrap', 'ProcessWrap', 'PipeWrap', 'TTYWrap', 'Immediate']);

function count(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

// Taken inside a hook, like the check, so vitest's own hook timer is in both counts.
let baseline = new Map<string, number>();
beforeAll(() => {
  baseline = count();
});

afterAll(async () => {
  // Let sockets and exited children finish closing (a subscriber connection closes up to
  // 1.5 s after the last wait: a channel lingers 1 s, the connection 0.5 s more).
  let leaked: string[] = [];
  for (let i = 0; i < 80; i++) {
    const now = count();
    leaked = [...now].filter(([type, n]) => WATCHED.has(type) && n > (baseline.get(type) ?? 0)).map(([t, n]) => `${t} x${n - (baseline.get(t) ?? 0)}`);
    if (leaked.length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the test file left handles open (they keep the event loop alive): ${leaked.join(', ')}`);
});
