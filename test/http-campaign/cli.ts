/**
 * `npm run http-campaign -- [--seed S] [--minutes M] [--adapters a,b] [--head-aware] [--replay FILE]`
 *
 * Runs the differential HTTP campaign on every adapter (or those named) at once, from a random
 * seed unless one is given, for 60 s of search per adapter unless `--minutes` says otherwise;
 * each violation of a new kind is shrunk (up to 60 s), printed and written to
 * test/http-campaign/failures/<adapter>-<seed>.json. `--replay FILE` runs a written case again.
 * `--head-aware`: the apps' bodies name a HEAD as HEAD (by default a HEAD renders as its GET).
 * Exits with 1 when anything broke a rule.
 */
import { readFileSync } from 'node:fs';
import { ADAPTERS, type Adapter } from './apps.js';
import { replay, report, runCampaign } from './campaign.js';
import type { Case } from './model.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

function number(name: string): number | undefined {
  const text = option(name);
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got ${text}`);
  return n;
}

const replayFile = option('replay');
if (replayFile !== undefined) {
  const saved = JSON.parse(readFileSync(replayFile, 'utf8')) as { adapter: Adapter; case: Case; headAware?: boolean };
  console.log(`replaying ${replayFile} on ${saved.adapter}`);
  const violation = await replay(saved.adapter, saved.case, saved.headAware === true);
  console.log(violation ? `VIOLATION [${violation.kind}] at action ${violation.action}: ${violation.message}` : 'no violation');
  process.exit(violation ? 1 : 0);
}

const adapters = (option('adapters')?.split(',') ?? [...ADAPTERS]) as Adapter[];
for (const a of adapters) if (!ADAPTERS.includes(a)) throw new Error(`--adapters: unknown adapter ${JSON.stringify(a)} (known: ${ADAPTERS.join(', ')})`);
const seed = number('seed') ?? Math.floor(Math.random() * 2 ** 31);
const minutes = number('minutes');
const searchMs = minutes === undefined ? 60_000 : minutes * 60_000;
console.log(`http campaign: seed ${seed}, adapters ${adapters.join(', ')}, ${searchMs / 1000} s of search each`);
const started = performance.now();
const headAware = process.argv.includes('--head-aware');
const results = await runCampaign({ seed, adapters, searchMs, shrinkMs: 60_000, headAware, log: (line) => console.log(line) });
report(results, (line) => console.log(line));
const failed = results.filter((r) => r.failures.length > 0 || r.crash);
console.log(`\n${Math.round((performance.now() - started) / 1000)} s; ${failed.length === 0 ? 'no violations' : `violations on ${failed.map((r) => r.adapter).join(', ')}`} (seed ${seed})`);
process.exit(failed.length === 0 ? 0 : 1);
