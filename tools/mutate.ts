/**
 * The mutation guard: `npm run mutate` (on request, not in CI).
 *
 * Breaks one critical point of the protocol at a time (see test/mutations/list.ts: the Lua
 * scripts' NX, token checks and publishes, the L1's message handlers, the tag checks, the
 * invalidation on HTTP writes, the lead hand-off, the fail-safe hold), runs the test files
 * that claim it, and reports whether they failed ("killed") or passed ("survived"). A
 * mutation whose search string is not found exactly once is "stale": the code it targets has
 * changed, and the list must follow. A files-and-filter pair that selects no test is "no
 * tests". Anything but killed, or a baseline run that fails, makes the script exit 1.
 *
 * Why a list of our own and not Stryker: Stryker mutates every operator it finds in the files
 * it is given and reruns the tests for each; it cannot be pointed at one line inside a Lua
 * string, and the tests that prove these points start Redis servers, clusters and child
 * processes, so one full Stryker pass over these files would take hours on this machine. A
 * hand-written list breaks exactly the mechanisms the README promises and runs in minutes.
 *
 * The working tree is never touched: src/, test/, tools/ and the configuration are copied to
 * a scratch directory (node_modules symlinked), each mutation is applied there, its tests run,
 * and the file is restored before the next one. The report is printed and written to
 * test/mutations/REPORT.md.
 *
 *   node --import tsx tools/mutate.ts [--only id,id] [--no-baseline] [--no-report]
 *   node --import tsx tools/mutate.ts --check    (only: does every search string still apply once? no test runs)
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { root } from './child-process.js';
import { MUTATIONS, occurrences, type Mutation } from '../test/mutations/list.js';

/** Longest run of one mutation's tests: a hang counts as killed (the test did not pass). */
const RUN_TIMEOUT_MS = 300_000;

type Outcome = 'killed' | 'killed (timeout)' | 'survived' | 'stale' | 'no tests';

interface Row {
  mutation: Mutation;
  outcome: Outcome;
  seconds: number;
  detail: string;
}

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const only = (() => {
  const i = args.indexOf('--only');
  return i === -1 ? undefined : new Set(args[i + 1]!.split(','));
})();

/** Copies what the tests need into a scratch directory, with node_modules symlinked. */
function scratchCopy(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dogpile-guard-mutate-'));
  const skip = new Set(['node_modules', '.git', 'dist', 'coverage']);
  for (const entry of readdirSync(root)) {
    if (skip.has(entry)) continue;
    cpSync(path.join(root, entry), path.join(dir, entry), { recursive: true });
  }
  symlinkSync(realpathSync(path.join(root, 'node_modules')), path.join(dir, 'node_modules'), 'dir');
  return dir;
}

interface RunResult {
  passed: boolean;
  /** False when the files and filter selected no test: nothing was checked. */
  ran: boolean;
  timedOut: boolean;
  seconds: number;
  summary: string;
  /** The failures vitest printed (for a baseline run that fails). */
  failures: string;
}

/** The process group of the vitest run in progress, stopped with the script (Ctrl-C). */
let running: number | undefined;
let scratch: string | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    try {
      if (running !== undefined) process.kill(-running, 'SIGKILL');
    } catch {
      // already gone
    }
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    process.exit(130);
  });
}

/** `npx vitest run --config vitest.all.config.ts <files> [-t filter]` in `cwd`; CI unset so no retry hides a failure. */
function vitest(cwd: string, files: string[], filter: string | undefined): Promise<RunResult> {
  // vitest.all.config.ts: a mutation's tests may be integration files (the cross-process proofs).
  const argv = ['vitest', 'run', '--config', 'vitest.all.config.ts', ...files, ...(filter ? ['-t', filter] : [])];
  const env = { ...process.env };
  delete env.CI;
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn('npx', argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running = child.pid;
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // The whole process group: vitest, its forks, the Redis servers and children it started.
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, RUN_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      running = undefined;
      // eslint-disable-next-line no-control-regex
      const plain = out.replace(/\u001b\[[0-9;]*m/g, '');
      const tests = plain.match(/^\s*Tests\s+(.*)$/m)?.[1]?.trim() ?? '';
      const failedAt = plain.indexOf('Failed Tests');
      const ran = timedOut || /\d+ (passed|failed)/.test(tests);
      resolve({
        passed: code === 0 && ran && !timedOut,
        ran,
        timedOut,
        seconds: (performance.now() - started) / 1000,
        summary: timedOut ? `no result after ${RUN_TIMEOUT_MS / 1000} s` : tests || plain.trim().split('\n').slice(-3).join(' '),
        failures: failedAt === -1 ? '' : plain.slice(failedAt, failedAt + 4000),
      });
    });
  });
}

/** `--check`: every mutation's search string is found exactly once in its file (nothing is run). */
function check(list: Mutation[]): void {
  let stale = 0;
  for (const m of list) {
    const found = occurrences(readFileSync(path.join(root, m.file), 'utf8'), m.search);
    if (found !== 1) {
      stale++;
      console.log(`${m.id}: stale (search string found ${found} times in ${m.file})`);
    }
  }
  console.log(`${list.length - stale} of ${list.length} mutations apply`);
  process.exitCode = stale === 0 ? 0 : 1;
}

async function main(): Promise<void> {
  const list = MUTATIONS.filter((m) => !only || only.has(m.id));
  if (flag('--check')) return check(list);
  const started = performance.now();
  const dir = scratchCopy();
  scratch = dir;
  console.log(`scratch copy: ${dir}`);
  const rows: Row[] = [];
  const baselineFailed: string[] = [];
  try {
    if (!flag('--no-baseline')) {
      // Every test run below must pass on the unmutated code, or a "killed" means nothing.
      const runs = new Map<string, { files: string[]; filter: string | undefined }>();
      for (const m of list) runs.set(`${m.tests.join(' ')} -t ${m.filter ?? ''}`, { files: m.tests, filter: m.filter });
      for (const [label, run] of runs) {
        const r = await vitest(dir, run.files, run.filter);
        console.log(`baseline ${r.passed ? 'passes' : 'FAILS'} (${r.seconds.toFixed(0)} s): ${label}  [${r.summary}]`);
        if (!r.passed) {
          baselineFailed.push(label);
          console.log(r.failures);
        }
      }
    }
    for (const m of list) {
      const file = path.join(dir, m.file);
      const original = readFileSync(file, 'utf8');
      const found = occurrences(original, m.search);
      if (found !== 1) {
        rows.push({ mutation: m, outcome: 'stale', seconds: 0, detail: `search string found ${found} times in ${m.file}` });
        console.log(`${m.id}: stale (found ${found} times)`);
        continue;
      }
      writeFileSync(file, original.replace(m.search, () => m.replace));
      try {
        const r = await vitest(dir, m.tests, m.filter);
        const outcome: Outcome = !r.ran ? 'no tests' : r.passed ? 'survived' : r.timedOut ? 'killed (timeout)' : 'killed';
        rows.push({ mutation: m, outcome, seconds: r.seconds, detail: r.summary });
        console.log(`${m.id}: ${outcome} (${r.seconds.toFixed(0)} s) [${r.summary}]`);
      } finally {
        writeFileSync(file, original);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const minutes = (performance.now() - started) / 60_000;
  const report = render(rows, baselineFailed, minutes);
  console.log(`\n${report}`);
  if (!flag('--no-report') && !only) writeFileSync(path.join(root, 'test/mutations/REPORT.md'), report);
  const bad = rows.filter((r) => !r.outcome.startsWith('killed')).length + baselineFailed.length;
  process.exitCode = bad > 0 ? 1 : 0;
}

function render(rows: Row[], baselineFailed: string[], minutes: number): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const lines = [
    '# Mutation guard report',
    '',
    `Command: \`npm run mutate\` (tools/mutate.ts, mutations in test/mutations/list.ts)`,
    `Date: ${new Date().toISOString()}; run time ${minutes.toFixed(1)} min on ${os.cpus().length} cores`,
    '',
    `Killed ${rows.filter((r) => r.outcome.startsWith('killed')).length} of ${rows.length}; ` +
      `survived ${rows.filter((r) => r.outcome === 'survived').length}; stale ${rows.filter((r) => r.outcome === 'stale').length}; ` +
      `no tests ${rows.filter((r) => r.outcome === 'no tests').length}` +
      (baselineFailed.length ? `; baseline failing: ${baselineFailed.join(', ')}` : '; every baseline run passed'),
    '',
    '| mutation | what is broken | file | tests | outcome | s | vitest |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) =>
      `| ${r.mutation.id} | ${cell(r.mutation.breaks)} | ${r.mutation.file} | ${cell(r.mutation.tests.join(' '))}${r.mutation.filter ? ` -t "${cell(r.mutation.filter)}"` : ''} | ${r.outcome} | ${r.seconds.toFixed(0)} | ${cell(r.detail)} |`,
    ),
    '',
  ];
  return lines.join('\n');
}

await main();
