/**
 * `npm run chaos -- [--seed S] [--minutes M] [--workers N] [--run-seconds R] [--topology single|cluster] [--runtimes node,bun,deno]`
 *
 * Without --seed: a campaign of histories for M minutes (default 1), from a random seed.
 * With --seed and no --minutes: that one history again (a replay). With both: histories
 * S, S+1, ... for M minutes. Exits with 1 when any history broke a promise.
 * `--check FILE` runs the checker again on a written history; `--keep` writes every history.
 * `--topology` forces the cache's Redis (else each seed draws it); `--runtimes` runs worker i
 * under the i-th runtime of the list, round robin (else every worker is Node).
 */
import { readFileSync } from 'node:fs';
import { check } from './checker.js';
import { RUNTIMES, type History, type Runtime, type Topology } from './history.js';
import { DEFAULT_RUN_MS, DEFAULT_WORKERS } from './config.js';
import { runCampaign } from './campaign.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

function number(name: string, fallback: number | undefined): number | undefined {
  const text = option(name);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got ${text}`);
  return n;
}

const recheck = option('check');
if (recheck !== undefined) {
  // Runs the checker again on a history written by an earlier run.
  const saved = JSON.parse(readFileSync(recheck, 'utf8')) as History;
  const violations = check(saved);
  for (const v of violations) console.log(`[${v.rule}] +${v.at} ms: ${v.message}`);
  console.log(`${violations.length} violations`);
  process.exit(violations.length === 0 ? 0 : 1);
}

const seedGiven = number('seed', undefined);
const seed = seedGiven ?? Math.floor(Math.random() * 2 ** 31);
const minutes = number('minutes', seedGiven === undefined ? 1 : undefined);
const workers = number('workers', DEFAULT_WORKERS)!;
const runMs = number('run-seconds', DEFAULT_RUN_MS / 1000)! * 1000;
if (workers < 1 || !Number.isInteger(workers)) throw new Error('--workers must be a whole number ≥ 1');
const topology = option('topology');
if (topology !== undefined && topology !== 'single' && topology !== 'cluster') throw new Error(`--topology must be single or cluster, got ${topology}`);
const runtimeList = option('runtimes')?.split(',').map((r) => r.trim());
for (const r of runtimeList ?? []) if (!(RUNTIMES as readonly string[]).includes(r)) throw new Error(`--runtimes must list runtimes among ${RUNTIMES.join(', ')}, got ${r}`);
const shape = { workers, durationMs: runMs, ...(topology === undefined ? {} : { topology: topology as Topology }), ...(runtimeList === undefined ? {} : { runtimes: runtimeList as Runtime[] }) };

const started = performance.now();
console.log(
  `chaos campaign: seed ${seed}, ${minutes === undefined ? 'one history' : `${minutes} min`}, ${workers} workers${runtimeList ? ` (${runtimeList.join(', ')})` : ''}, ${runMs / 1000} s per history, ${topology ?? 'topology from each seed'}`,
);
const summary = await runCampaign({ seed, minutes, histories: minutes === undefined ? 1 : undefined, shape, keep: process.argv.includes('--keep'), log: (line) => console.log(line) });
const faults = Object.entries(summary.faults).map(([k, n]) => `${k} ${n}`).join(', ');
console.log(`\n${summary.histories} histories checked in ${Math.round((performance.now() - started) / 1000)} s: ${summary.ops} operations, ${summary.loaderRuns} loader runs; faults: ${faults}`);
if (summary.failed.length === 0) {
  console.log('no violations');
} else {
  const byRule = new Map<string, number>();
  for (const f of summary.failed) for (const v of f.violations) byRule.set(v.rule, (byRule.get(v.rule) ?? 0) + 1);
  console.log(`violations in ${summary.failed.length} histories (${[...byRule].map(([rule, n]) => `${rule} ${n}`).join(', ')}):`);
  for (const f of summary.failed) console.log(`  seed ${f.seed}: ${f.violations.length} (${[...new Set(f.violations.map((v) => v.rule))].join(', ')}), ${f.file}; replay: ${f.replay}`);
  process.exitCode = 1;
}
