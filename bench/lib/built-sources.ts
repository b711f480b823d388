/**
 * The benchmarks measure dogpile-guard as it ships, not as tsx runs its sources: tsx compiles
 * with esbuild's `keepNames`, which wraps every named closure created per call in `__name()`
 * (an `Object.defineProperty` per call), a cost the peers, compiled in node_modules, do not
 * carry. `useBuiltSources(checkout)` compiles the checkout's `src/` file by file (esbuild, the
 * compiler under tsup; ES modules for Node 20, no `keepNames`) to `.tmp/bench-src/<name>/` and
 * makes every import of a module of that `src/` load its build instead, in this process and,
 * through NODE_OPTIONS, in every process it starts from then on. BENCH_SOURCES=tsx leaves the
 * sources to tsx.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { register } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { root } from '../../tools/child-process.js';

/** How dogpile-guard runs in this benchmark run, for the results' header. */
export function sourcesNote(): string {
  return process.env.BENCH_SOURCES === 'tsx'
    ? 'dogpile-guard runs from its TypeScript sources under tsx (BENCH_SOURCES=tsx), with the `__name()` wrappers of its `keepNames`.'
    : "dogpile-guard runs as built for the package: each checkout's `src/` compiled by esbuild (the compiler under tsup) to ES modules for Node 20, without the `__name()` wrappers tsx adds.";
}

/** Compiles `<checkout>/src` and sends every import of its modules to the build (a no-op with BENCH_SOURCES=tsx). */
export function useBuiltSources(checkout: string = root, name = 'current'): void {
  if (process.env.BENCH_SOURCES === 'tsx') return;
  const srcDir = path.join(path.resolve(checkout), 'src');
  const outDir = path.join(root, '.tmp', 'bench-src', name);
  const files = (readdirSync(srcDir, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => path.join(srcDir, f));
  rmSync(outDir, { recursive: true, force: true });
  execFileSync(
    path.join(root, 'node_modules', '.bin', 'esbuild'),
    [...files, `--outdir=${outDir}`, `--outbase=${srcDir}`, '--format=esm', '--platform=node', '--target=node20', '--log-level=warning'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const pair: [string, string] = [`${pathToFileURL(srcDir).href}/`, `${pathToFileURL(outDir).href}/`];
  register(pathToFileURL(path.join(root, 'bench', 'lib', 'built-sources-hooks.mjs')), { data: [pair] });
  const pairs = [...(JSON.parse(process.env.DOGPILE_BENCH_BUILDS ?? '[]') as [string, string][]), pair];
  process.env.DOGPILE_BENCH_BUILDS = JSON.stringify(pairs);
  const hooks = pathToFileURL(path.join(root, 'bench', 'lib', 'use-built-sources.mjs')).href;
  const options = process.env.NODE_OPTIONS ?? '';
  if (!options.includes(hooks)) process.env.NODE_OPTIONS = `${options} --import ${hooks}`.trim();
}
