/**
 * The walk of `getOrCompute`'s key on the Redis route: one cold `getOrCompute` against a real
 * Redis, with every function of every src module announcing its file and its arguments when it
 * is entered. Two walks are printed, each as the files in the order visited (consecutive entries
 * of one file are one visit) and how many times each file is visited:
 *   - the key's walk: the calls that receive the key — as an argument, inside an array argument
 *     or as a field of an object argument (the key itself or a store key built from it);
 *   - every call: each function entry, the key's or not (clock reads, option checks, helpers).
 * Resumptions after an `await` are not function entries: the count is of calls into a file.
 * The exit code is 1 when the key's walk visits a file more than twice.
 *
 *   npm run walk   (node --import tsx tools/walk.ts [--src <dir>]; default: this tree's src/)
 *
 * The src files are copied to .tmp/walk-src/ with one statement added at the top of every
 * function body; the copy is what runs. `--src` walks another tree (e.g. a checkout of main).
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { root } from './child-process.js';
import { startRedis } from './redis-server.js';

const args = process.argv.slice(2);
const srcArg = args.indexOf('--src');
const src = path.resolve(srcArg === -1 ? path.join(root, 'src') : args[srcArg + 1]!);
const copy = path.join(root, '.tmp', 'walk-src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full) : full.endsWith('.ts') ? [full] : [];
  });
}

/** The names a parameter binds (`a`, `{ a, b }`, `[a, ...b]`). */
function bound(name: ts.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text];
  return name.elements.flatMap((element) => (ts.isOmittedExpression(element) ? [] : bound(element.name)));
}

/**
 * `text` with `__dogpileWalk(file, [parameters])` as the first statement of every function body
 * with a block.
 */
function instrument(text: string, file: string): string {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const at: { pos: number; call: string }[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
        ts.isConstructorDeclaration(node) || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node)) &&
      node.body !== undefined && ts.isBlock(node.body)
    ) {
      const names = node.parameters.flatMap((parameter) => bound(parameter.name)).filter((name) => name !== 'this');
      at.push({
        pos: node.body.getStart(source) + 1,
        call: `(globalThis as any).__dogpileWalk?.(${JSON.stringify(file)}, [${names.join(', ')}]);`,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  let out = text;
  for (const { pos, call } of at.sort((a, b) => b.pos - a.pos)) out = out.slice(0, pos) + call + out.slice(pos);
  return out;
}

/** Whether `value` is the key, a string holding it, or (to `depth` levels) an array or object holding one. */
function carries(value: unknown, key: string, depth: number): boolean {
  if (typeof value === 'string') return value.includes(key);
  if (depth === 0 || value === null || typeof value !== 'object') return false;
  const inner = Array.isArray(value) ? value : Object.values(value);
  return inner.some((item) => carries(item, key, depth - 1));
}

/** Prints one walk and returns its summary line. */
function report(title: string, visits: string[]): string {
  const count = new Map<string, number>();
  for (const file of visits) count.set(file, (count.get(file) ?? 0) + 1);
  console.log(`\n${title}: ${visits.length} visits to ${count.size} files`);
  console.log(visits.map((f, i) => `${String(i + 1).padStart(3)}  ${f}`).join('\n'));
  console.log('visits per file:');
  for (const [file, n] of [...count].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(4)}  ${file}`);
  const over = [...count].filter(([, n]) => n > 2);
  return `${over.length} of ${count.size} files visited more than twice (most visits of one file: ${Math.max(...count.values())})`;
}

async function main(): Promise<void> {
  rmSync(copy, { recursive: true, force: true });
  mkdirSync(copy, { recursive: true });
  cpSync(src, copy, { recursive: true });
  for (const file of files(copy)) {
    const name = path.relative(copy, file).split(path.sep).join('/');
    writeFileSync(file, instrument(readFileSync(file, 'utf8'), name));
  }
  const lib = (await import(pathToFileURL(path.join(copy, 'index.ts')).href)) as typeof import('../src/index.js');
  const server = await startRedis();
  const cache = lib.createCache({ redis: server.client() });
  try {
    // Warm up on another key: connections, script loading and the subscriber are not the walk.
    await cache.getOrCompute('walk:warm', () => 'w', 60_000);
    const key = 'walk:cold';
    const keyWalk: string[] = [];
    const every: string[] = [];
    const enter = (visits: string[], file: string): void => {
      if (visits[visits.length - 1] !== file) visits.push(file);
    };
    (globalThis as { __dogpileWalk?: (file: string, args: unknown[]) => void }).__dogpileWalk = (file, args) => {
      enter(every, file);
      if (args.some((arg) => carries(arg, key, 1))) enter(keyWalk, file);
    };
    await cache.getOrCompute(key, async () => 'v', 60_000);
    delete (globalThis as { __dogpileWalk?: unknown }).__dogpileWalk;
    const over = report('every call into src (the key\'s or not)', every);
    const keyOver = report(`the key's walk: the calls that receive '${key}' or a key built from it`, keyWalk);
    console.log(`\nevery call: ${over}\nthe key's walk: ${keyOver}`);
    if (!keyOver.startsWith('0 ')) process.exitCode = 1;
  } finally {
    await cache.close();
    await server.stop();
    rmSync(copy, { recursive: true, force: true });
  }
}

await main();
