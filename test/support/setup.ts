/**
 * Runs in every test worker: a test file that leaves timers, sockets or child processes
 * behind fails, and so does a file during which Node warned that listeners pile up on an
 * emitter (MaxListenersExceededWarning: a leak, e.g. one more 'close' listener per
 * reconnection). Unhandled rejections already fail the run (vitest reports them as errors).
 */
import { afterAll, beforeAll } from 'vitest';

const WATCHED = new Set(['Timeout', 'TCPSocketWrap', 'TCPWrap', 'ProcessWrap', 'PipeWrap', 'TTYWrap', 'Immediate']);

function count(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

// One 'warning' listener per worker process, however many files it runs.
const LEAK_WARNINGS = Symbol.for('dogpile-guard.test.listenerLeakWarnings');
type Tracked = typeof globalThis & { [LEAK_WARNINGS]?: Error[] };
const tracked = globalThis as Tracked;
if (!tracked[LEAK_WARNINGS]) {
  const seen: Error[] = [];
  tracked[LEAK_WARNINGS] = seen;
  process.on('warning', (warning) => {
    if (warning.name === 'MaxListenersExceededWarning') seen.push(warning);
  });
}
const leakWarnings = tracked[LEAK_WARNINGS];

// Taken inside a hook, like the check, so vitest's own hook timer is in both counts.
let baseline = new Map<string, number>();
beforeAll(() => {
  baseline = count();
  leakWarnings.length = 0;
});

afterAll(async () => {
  // Let sockets and exited children finish closing (a subscriber connection closes up to
  // 1.5 s after the last wait: a channel lingers 1 s, the connection 0.5 s more).
  let leaked: string[] = [];
  for (let i = 0; i < 80; i++) {
    const now = count();
    leaked = [...now].filter(([type, n]) => WATCHED.has(type) && n > (baseline.get(type) ?? 0)).map(([t, n]) => `${t} x${n - (baseline.get(t) ?? 0)}`);
    if (leaked.length === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // Warnings are emitted on the next tick: the waits above let every one of them arrive.
  await new Promise((r) => setImmediate(r));
  if (leakWarnings.length > 0) {
    const messages = [...new Set(leakWarnings.map((w) => w.message))];
    leakWarnings.length = 0;
    throw new Error(`listeners piled up during this test file (MaxListenersExceededWarning): ${messages.join('; ')}`);
  }
  if (leaked.length > 0) throw new Error(`the test file left handles open (they keep the event loop alive): ${leaked.join(', ')}`);
});
