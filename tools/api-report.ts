/**
 * The public API as a reviewable text: for every entry of package.json's `exports` map, the
 * declarations of what it exports, read with the TypeScript compiler from the built `.d.ts`
 * files (what a consumer's compiler reads), without comments. The types those declarations
 * use that no entry exports are listed too, since a change to them changes the API as well.
 *
 *   npm run api:update                             # build, then rewrite api/dogpile-guard.api.md
 *   node --import tsx tools/api-report.ts          # print the report of the current dist/
 *
 * test/api-report.test.ts fails while the committed report differs from the build's.
 * Entries are read from the exports map, so a new subpath needs no change here.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPORT = 'api/dogpile-guard.api.md';

interface Entry {
  /** The import specifier: `dogpile-guard`, `dogpile-guard/express`, ... */
  name: string;
  /** The built declaration file of its ESM condition. */
  types: string;
}

/** The package's entries, in the order of the exports map, from their `import.types`. */
export function entries(root = ROOT): Entry[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
  const found: Entry[] = [];
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = (target as { import?: { types?: string } }).import?.types;
    if (typeof types !== 'string') continue; // ./package.json
    found.push({ name: subpath === '.' ? pkg.name : `${pkg.name}${subpath.slice(1)}`, types: path.join(root, types) });
  }
  return found;
}

/** True when dist/ is missing or older than a file under src/. */
export function buildIsStale(root = ROOT): boolean {
  const built = path.join(root, 'dist', 'index.d.ts');
  if (!existsSync(built)) return true;
  const builtAt = statSync(built).mtimeMs;
  const newest = (dir: string): number =>
    Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).mtimeMs)));
  return Math.max(newest(path.join(root, 'src')), statSync(path.join(root, 'package.json')).mtimeMs) > builtAt;
}

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });

/** The statement that declares a symbol (a variable's whole statement), printed without comments. */
function print(node: ts.Node): string {
  const statement = ts.isVariableDeclaration(node) ? node.parent.parent : node;
  // Bundlers suffix names that collide inside one chunk (`Options$1`): not part of the API.
  // Private members appear in a .d.ts by name only; they are not callable from outside, and
  // listing them would make every internal rename look like an API change.
  return printer
    .printNode(ts.EmitHint.Unspecified, statement, statement.getSourceFile())
    .replace(/\$\d+\b/g, '')
    .replace(/^\s*private (?:static )?(?:readonly )?(?:get |set )?[\w#]+(?:\(\))?;\n/gm, '');
}

/** A declaration of a file's own (not a type parameter, a member or a local). */
function isTopLevel(node: ts.Node): boolean {
  const statement = ts.isVariableDeclaration(node) ? node.parent.parent : node;
  return ts.isSourceFile(statement.parent);
}

/** The report of the current dist/. */
export function apiReport(root = ROOT): string {
  const list = entries(root);
  for (const entry of list) if (!existsSync(entry.types)) throw new Error(`${path.relative(root, entry.types)} is missing: run npm run build`);
  const program = ts.createProgram(
    list.map((e) => e.types),
    { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true, skipLibCheck: true, types: ['node'] },
  );
  const checker = program.getTypeChecker();
  const dist = path.join(root, 'dist') + path.sep;
  const resolve = (symbol: ts.Symbol): ts.Symbol => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);

  const exported = new Set<ts.Symbol>();
  const sections: string[] = [];
  const used: ts.Symbol[] = [];
  const note = (node: ts.Node): void => {
    const visit = (n: ts.Node): void => {
      if (ts.isTypeReferenceNode(n) || ts.isExpressionWithTypeArguments(n) || ts.isTypeQueryNode(n)) {
        const name = ts.isTypeReferenceNode(n) ? n.typeName : ts.isTypeQueryNode(n) ? n.exprName : n.expression;
        const symbol = checker.getSymbolAtLocation(name);
        if (symbol) {
          const target = resolve(symbol);
          if (target.declarations?.some((d) => isTopLevel(d) && d.getSourceFile().fileName.startsWith(dist)) && !used.includes(target)) used.push(target);
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(node);
  };

  for (const entry of list) {
    const source = program.getSourceFile(entry.types)!;
    const moduleSymbol = checker.getSymbolAtLocation(source)!;
    const lines: string[] = [];
    for (const symbol of [...checker.getExportsOfModule(moduleSymbol)].sort((a, b) => a.name.localeCompare(b.name))) {
      const target = resolve(symbol);
      exported.add(target);
      for (const declaration of target.declarations ?? []) {
        const text = print(declaration);
        lines.push(symbol.name === target.name ? text : `// exported as ${symbol.name}\n${text}`);
        note(declaration);
      }
    }
    // Module augmentations (`declare module 'fastify' { ... }`) ship with the entry too.
    for (const statement of source.statements) {
      if (ts.isModuleDeclaration(statement) && ts.isStringLiteral(statement.name)) {
        lines.push(print(statement));
        note(statement);
      }
    }
    sections.push(`## \`${entry.name}\`\n\n\`\`\`ts\n${lines.join('\n\n')}\n\`\`\``);
  }

  // What the exported declarations use without any entry exporting it, followed transitively.
  const hidden: string[] = [];
  for (let i = 0; i < used.length; i++) {
    const symbol = used[i]!;
    if (exported.has(symbol)) continue;
    for (const declaration of symbol.declarations ?? []) {
      if (!isTopLevel(declaration) || !declaration.getSourceFile().fileName.startsWith(dist)) continue;
      hidden.push(print(declaration));
      note(declaration);
    }
  }
  hidden.sort();

  return [
    '# API report: dogpile-guard',
    '',
    '<!-- Written by `npm run api:update` (tools/api-report.ts) from the built .d.ts of every entry of',
    "     package.json's exports map. test/api-report.test.ts fails while it differs from the build. -->",
    '',
    'What each entry exports, as a consumer\'s compiler reads it (comments removed), then, if there are',
    'any, the types these declarations use that no entry exports. A change here is a change of the public API.',
    '',
    ...sections.flatMap((s) => [s, '']),
    // Absent while every type the entries use is exported by one of them.
    ...(hidden.length === 0 ? [] : ['## Used by the entries, not exported', '', '```ts', hidden.join('\n\n'), '```', '']),
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const text = apiReport();
  if (process.argv.includes('--write')) {
    writeFileSync(path.join(ROOT, REPORT), text);
    console.log(`wrote ${REPORT}`);
  } else {
    process.stdout.write(text);
  }
}
