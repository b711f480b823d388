/**
 * `npm run bench`: runs every `bench/*.bench.ts` in turn (or the ones named on the command
 * line: `npm run bench -- lock core`), each against its own throwaway redis-server, and
 * writes `bench/RESULTS.md`. Every benchmark is bounded in count and time. Besides their
 * sections, a full run redraws `bench/stampede.svg` (from the core section) and `docs/fleet.svg`
 * (from the fleet curve's: `npm run bench -- fleet`, up to 64 processes).
 */
import { readdirSync, writeFileSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';
import type { BenchContext, BenchModule } from './lib/types.js';
import { writeChart } from './chart.js';
import { sourcesNote, useBuiltSources } from './lib/built-sources.js';

const here = path.dirname(fileURLToPath(import.meta.url));

function versions(names: string[]): string {
  return names
    .map((n) => {
      try {
        return `${n} ${JSON.parse(readFileSync(path.join(here, '..', 'node_modules', n, 'package.json'), 'utf8')).version}`;
      } catch {
        return `${n} (not installed)`;
      }
    })
    .join(', ');
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const files = readdirSync(here)
    .filter((f) => f.endsWith('.bench.ts'))
    .sort()
    .filter((f) => only.length === 0 || only.includes(f.replace('.bench.ts', '')));
  const started = Date.now();
  // Before any benchmark imports src/: they all measure the build (see lib/built-sources.ts).
  useBuiltSources();
  const sections: string[] = [];
  const ctx: BenchContext = {
    quick: process.env.BENCH_QUICK === '1',
    log: (msg: string) => process.stdout.write(`  ${msg}\n`),
  };
  for (const file of files) {
    process.stdout.write(`\n▶ ${file}\n`);
    const mod = (await import(pathToFileURL(path.join(here, file)).href)) as BenchModule;
    const t0 = Date.now();
    const section = await mod.default(ctx);
    sections.push(section.trim());
    process.stdout.write(`  done in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  }
  const redisVersion = execFileSync('redis-server', ['--version']).toString().trim();
  const header = [
    '# Benchmark results',
    '',
    `Written by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)} in ${((Date.now() - started) / 1000).toFixed(0)} s.`,
    '',
    `- Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}`,
    `- Node ${process.version}; ${redisVersion.split(' ').slice(0, 3).join(' ')}`,
    `- Packages: ${versions(['ioredis', 'redlock', 'redis-semaphore', 'async-cache-dedupe', 'bentocache', 'cache-manager', '@keyv/redis', 'lru-cache', 'express', 'fastify', 'apicache', '@nestjs/core', '@nestjs/cache-manager', 'autocannon', 'msgpackr', 'next', '@fortedigital/nextjs-cache-handler'])}`,
    '- Each benchmark runs against its own throwaway `redis-server` on loopback; numbers are medians over repeats with min–max in brackets.',
    `- ${sourcesNote()}`,
    '',
  ].join('\n');
  if (only.length === 0) {
    writeFileSync(path.join(here, 'RESULTS.md'), `${header}\n${sections.join('\n\n')}\n`);
    process.stdout.write(`\nwrote bench/RESULTS.md\n`);
    writeChart();
    process.stdout.write(`wrote bench/stampede.svg\n`);
    // Imported only now: its module imports src/, which must load as built (useBuiltSources above).
    const { writeFleetChart } = (await import('./fleet.bench.js')) as typeof import('./fleet.bench.js');
    writeFleetChart();
    process.stdout.write(`wrote docs/fleet.svg\n`);
  } else {
    const out = path.join(here, `.out`);
    execFileSync('mkdir', ['-p', out]);
    writeFileSync(path.join(out, `${only.join('-')}.md`), `${header}\n${sections.join('\n\n')}\n`);
    process.stdout.write(`\nwrote bench/.out/${only.join('-')}.md (a partial run does not replace RESULTS.md)\n`);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
