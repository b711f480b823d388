/**
 * The walk of `getOrCompute`'s key on the Redis route: one cold `getOrCompute` against a real
 * Redis, with every function of every src module announcing its file when it is entered. Prints
 * the files in the order the call visits them (consecutive entries of one file are one visit)
 * and how many times each file is re-entered after the call left it. Resumptions after an
 * `await` are not function entries: the count is of calls into a file.
 *
 *   node --import tsx tools/walk.ts [--src <dir>]   (default: this tree's src/)
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

/** `text` with `__dogpileWalk(file)` as the first statement of every function body with a block. */
function instrument(text: string, file: string): string {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const at: number[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
        ts.isConstructorDeclaration(node) || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node)) &&
      node.body !== undefined && ts.isBlock(node.body)
    ) {
      at.push(node.body.getStart(source) + 1);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  const call = `(globalThis as any).__dogpileWalk?.(${JSON.stringify(file)});`;
  let out = text;
  for (const pos of at.sort((a, b) => b - a)) out = out.slice(0, pos) + call + out.slice(pos);
  return out;
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
    const visits: string[] = [];
    (globalThis as { __dogpileWalk?: (file: string) => void }).__dogpileWalk = (file) => {
      if (visits[visits.length - 1] !== file) visits.push(file);
    };
    await cache.getOrCompute('walk:cold', async () => 'v', 60_000);
    delete (globalThis as { __dogpileWalk?: unknown }).__dogpileWalk;
    const count = new Map<string, number>();
    for (const file of visits) count.set(file, (count.get(file) ?? 0) + 1);
    console.log(`the walk of a cold getOrCompute (Redis route), ${visits.length} visits to ${count.size} files:`);
    console.log(visits.map((f, i) => `${String(i + 1).padStart(3)}  ${f}`).join('\n'));
    console.log('\nvisits per file (re-entries = visits - 1):');
    for (const [file, n] of [...count].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(4)}  ${file}`);
    const over = [...count].filter(([, n]) => n > 2);
    console.log(`\n${over.length} of ${count.size} files visited more than twice; most visits of one file: ${Math.max(...count.values())}`);
  } finally {
    await cache.close();
    await server.stop();
    rmSync(copy, { recursive: true, force: true });
  }
}

await main();
