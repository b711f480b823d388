/**
 * Module hooks for the benchmarks: a module of a checkout's `src/` resolves to its build (see
 * built-sources.ts), whoever imports it: a benchmark, a worker, tsx. `data` (from
 * `register`) is the list of [source directory URL, build directory URL] pairs.
 */
let pairs = [];

export function initialize(data) {
  pairs = data;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (resolved.url.endsWith('.ts')) {
    for (const [src, built] of pairs) {
      if (resolved.url.startsWith(src)) return { ...resolved, url: `${built}${resolved.url.slice(src.length, -'.ts'.length)}.js`, format: 'module' };
    }
  }
  return resolved;
}
