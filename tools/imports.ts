/**
 * The import graph of src/: folders import one way (adapters → http → core → {store, lock} →
 * redis → shared, and the optional entries over them) and no file cycle exists, type-only
 * imports included. Prints every violation and exits 1 if there is one.
 *
 *   node --import tsx tools/imports.ts [--src <dir>]   (default: this tree's src/)
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { root } from './child-process.js';

const srcAt = process.argv.indexOf('--src');
const src = srcAt === -1 ? path.join(root, 'src') : path.resolve(process.argv[srcAt + 1]!);

/** What each folder may import, besides itself. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  shared: [],
  redis: ['shared'],
  store: ['redis', 'shared'],
  lock: ['redis', 'shared'],
  core: ['store', 'lock', 'shared'],
  http: ['core', 'shared'],
  express: ['http', 'core', 'shared'],
  fastify: ['http', 'core', 'shared'],
  nest: ['http', 'core', 'shared'],
  fetch: ['http', 'core', 'shared'],
  hono: ['http', 'core', 'shared'],
  koa: ['http', 'core', 'shared'],
  next: ['core', 'shared'],
  otel: ['shared'],
  prometheus: ['shared'],
  msgpack: ['core', 'shared'],
  '.': ['core', 'store', 'lock', 'shared', 'redis'],
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full) : full.endsWith('.ts') ? [full] : [];
  });
}

/** The src files `file` imports (relative specifiers, `.js` mapped to `.ts`), type-only imports included. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out = new Set<string>();
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms)) {
    const target = path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts'));
    out.add(target);
  }
  return [...out];
}

export function graph(): Map<string, string[]> {
  const g = new Map<string, string[]>();
  for (const file of files(src)) g.set(file, importsOf(file).filter((t) => t.startsWith(src)));
  return g;
}

const rel = (file: string) => path.relative(src, file);
const folderOf = (file: string) => {
  const r = rel(file);
  return r.includes(path.sep) ? r.split(path.sep)[0]! : '.';
};

/**
 * Inside http/, by the folder a file lives in: the pure rules (`rules/`) import neither the
 * flow, the exchanges nor the adapters' contract; the flow (`flow/`) imports no exchange; the
 * contract at the top (`options.ts`, `pipeline.ts`) imports no exchange. Type-only imports
 * are left out: a rule may name the shape of a fact the flow hands it.
 */
const HTTP_MAY_IMPORT: Record<string, readonly string[]> = {
  'http/rules': [],
  'http/flow': ['http/rules', 'http'],
  'http/exchange': ['http/rules', 'http/flow', 'http'],
  http: ['http/rules', 'http/flow'],
};

const httpPartOf = (file: string) => {
  const parts = rel(file).split(path.sep);
  return parts[0] !== 'http' ? undefined : parts.length > 2 ? `http/${parts[1]}` : 'http';
};

/** The src files `file` (its text: `text`) imports values from (type-only imports left out). */
export function valueImportsOf(file: string, text: string): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s)?[^;]*?from\s+'(\.[^']+)'/gms)) {
    if (m[2] !== undefined) continue;
    out.add(path.resolve(path.dirname(file), m[3]!.replace(/\.js$/, '.ts')));
  }
  return [...out];
}

/** Imports across http/'s parts that `HTTP_MAY_IMPORT` does not allow (`read`: a file's text). */
export function httpPartViolations(files: readonly string[], read: (file: string) => string = (file) => readFileSync(file, 'utf8')): string[] {
  const out: string[] = [];
  for (const file of files) {
    const from = httpPartOf(file);
    if (from === undefined) continue;
    for (const target of valueImportsOf(file, read(file))) {
      const to = httpPartOf(target);
      if (to === undefined || to === from) continue;
      if (!HTTP_MAY_IMPORT[from]!.includes(to)) out.push(`${rel(file)} imports ${rel(target)} (${from} may import ${HTTP_MAY_IMPORT[from]!.join(', ') || 'nothing else in http/'})`);
    }
  }
  return out;
}

/** Every elementary cycle's smallest representative, found by a depth-first walk (strongly connected parts). */
export function cycles(g: Map<string, string[]>): string[][] {
  // Tarjan's strongly connected components: a component of more than one file is a cycle.
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of g.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const part: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1 || (g.get(v) ?? []).includes(v)) found.push(part.map(rel).sort());
    }
  };
  for (const v of g.keys()) if (!idx.has(v)) visit(v);
  return found;
}

export function layerViolations(g: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of g) {
    const from = folderOf(file);
    for (const target of targets) {
      const to = folderOf(target);
      if (to === from) continue;
      if (!(MAY_IMPORT[from] ?? []).includes(to)) out.push(`${rel(file)} imports ${rel(target)} (${from} may import ${(MAY_IMPORT[from] ?? []).join(', ') || 'nothing else'})`);
    }
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('tools/imports.ts')) {
  const g = graph();
  const found = cycles(g);
  const layers = [...layerViolations(g), ...httpPartViolations([...g.keys()])];
  for (const c of found) console.log(`file cycle: ${c.join(' ↔ ')}`);
  for (const v of layers) console.log(`layer skip: ${v}`);
  console.log(`${g.size} files in src/: ${found.length} file cycles, ${layers.length} layer skips`);
  process.exitCode = found.length + layers.length === 0 ? 0 : 1;
}
