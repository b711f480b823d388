/**
 * Checks the Markdown documentation against the code: every ```ts block of README.md,
 * CONTRIBUTING.md and docs/**\/*.md type-checks as its own module, with `dogpile-guard` (and its subpaths)
 * resolved to src/ as in tsconfig.json; every relative link resolves to a file, and every
 * `#anchor` to a heading (or an `id`) of the page it names.
 *
 * A block may use the names of the reader's own application that docs/snippet-context.d.ts
 * declares (`cache`, `app`, `db`, `loadUser`, ...); what it takes from the library, a
 * framework or Node it imports itself.
 *
 * A block that is deliberately partial (a fragment, a signature sketch) uses another info
 * string, e.g. ```ts partial, and is not compiled.
 *
 *   node --import tsx tools/docs-check.ts     # prints every problem, exits 1 if any
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The stand-ins for the reader's own application (`db`, `app`, `cache`, loaders) a block may use. */
export const SNIPPET_CONTEXT = 'docs/snippet-context.d.ts';

export interface CodeBlock {
  /** The Markdown file, relative to the repository root. */
  file: string;
  /** 1-based line of the block's first code line in the Markdown file. */
  line: number;
  info: string;
  code: string;
}

export interface DocProblem {
  file: string;
  line: number;
  message: string;
}

/** README.md, CONTRIBUTING.md and every Markdown file under docs/, relative to the root. */
export function markdownFiles(root = ROOT): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) found.push(rel);
    }
  };
  if (existsSync(path.join(root, 'docs'))) walk('docs');
  return ['README.md', 'CONTRIBUTING.md', ...found.sort()];
}

/** The fenced code blocks of a Markdown text (``` or ~~~ fences), with their info string. */
export function codeBlocks(file: string, text: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[1]!;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[j]!)) body.push(lines[j++]!);
    blocks.push({ file, line: i + 2, info: open[2]!.trim(), code: body.join('\n') });
    i = j;
  }
  return blocks;
}

/** Type-checks every block whose info string is exactly `ts` (or `typescript`). */
export function checkCodeBlocks(blocks: CodeBlock[], root = ROOT): DocProblem[] {
  const checked = blocks.filter((b) => b.info === 'ts' || b.info === 'typescript');
  if (checked.length === 0) return [];
  const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), (f) => ts.sys.readFile(f));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const options: ts.CompilerOptions = { ...parsed.options, noEmit: true, moduleDetection: ts.ModuleDetectionKind.Force, noUnusedLocals: false };
  // Each block is a virtual module next to the Markdown file (so the repository's package.json
  // makes it ESM, and top-level await is allowed).
  const virtual = new Map<string, CodeBlock>();
  for (const block of checked) {
    const name = path.join(root, path.dirname(block.file), `${path.basename(block.file, '.md')}.md-L${block.line}.doc.ts`);
    virtual.set(name, block);
  }
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => virtual.has(f) || fileExists.call(host, f);
  host.readFile = (f) => virtual.get(f)?.code ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, onError, create) => {
    const block = virtual.get(f);
    return block ? ts.createSourceFile(f, block.code, lang, true, ts.ScriptKind.TS) : getSourceFile.call(host, f, lang, onError, create);
  };
  const context = path.join(root, SNIPPET_CONTEXT);
  const program = ts.createProgram({ rootNames: [...virtual.keys(), ...(existsSync(context) ? [context] : [])], options, host });
  const problems: DocProblem[] = [];
  for (const [name, block] of virtual) {
    const sourceFile = program.getSourceFile(name)!;
    const diagnostics = [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)];
    for (const d of diagnostics) {
      const at = d.start === undefined ? 0 : sourceFile.getLineAndCharacterOfPosition(d.start).line;
      problems.push({ file: block.file, line: block.line + at, message: `ts block: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}` });
    }
  }
  return problems;
}

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown page offers: its headings' slugs (numbered when repeated) and ids. */
export function anchors(text: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutCode(text, false).split('\n')) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      found.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const id of line.matchAll(/\b(?:id|name)="([^"]+)"/g)) found.add(id[1]!);
  }
  return found;
}

/** The text with fenced blocks (and inline code, unless told) blanked, line count kept. */
function withoutCode(text: string, inline = true): string {
  const lines = text.split('\n');
  let fence: string | undefined;
  return lines
    .map((line) => {
      const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
      if (fence) {
        if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
        return '';
      }
      if (marker) {
        fence = marker;
        return '';
      }
      return inline ? line.replace(/(`+)[^`]*?\1/g, '') : line;
    })
    .join('\n');
}

/** Every relative link (and image) of a page resolves: the file exists, the anchor too. */
export function checkLinks(file: string, text: string, root = ROOT): DocProblem[] {
  const problems: DocProblem[] = [];
  const lines = withoutCode(text).split('\n');
  const pageAnchors = new Map<string, Set<string>>();
  const anchorsOf = (target: string): Set<string> => {
    let set = pageAnchors.get(target);
    if (!set) pageAnchors.set(target, (set = anchors(readFileSync(path.join(root, target), 'utf8'))));
    return set;
  };
  lines.forEach((line, index) => {
    const targets = [...line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g), ...line.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g), ...line.matchAll(/\b(?:href|src)="([^"]+)"/g)].map((m) => m[1]!);
    for (const target of targets) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
      const pathPart = decodeURI(rawPath);
      const resolved = pathPart === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), pathPart));
      const problem = (message: string) => problems.push({ file, line: index + 1, message: `link ${target}: ${message}` });
      if (resolved.startsWith('..')) {
        problem('points outside the repository');
        continue;
      }
      const absolute = path.join(root, resolved);
      if (!existsSync(absolute)) {
        problem(`${resolved} does not exist`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (!resolved.endsWith('.md') || statSync(absolute).isDirectory()) {
        if (!statSync(absolute).isDirectory()) continue; // line anchors into source files
        problem('an anchor into a directory');
        continue;
      }
      if (!anchorsOf(resolved).has(decodeURIComponent(anchor))) problem(`no heading #${anchor} in ${resolved}`);
    }
  });
  return problems;
}

/** Every problem of README.md and docs/: links first, then code blocks. */
export function checkDocs(root = ROOT): DocProblem[] {
  const problems: DocProblem[] = [];
  const blocks: CodeBlock[] = [];
  for (const file of markdownFiles(root)) {
    const text = readFileSync(path.join(root, file), 'utf8');
    problems.push(...checkLinks(file, text, root));
    blocks.push(...codeBlocks(file, text));
  }
  problems.push(...checkCodeBlocks(blocks, root));
  return problems;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkDocs();
  for (const p of problems) console.log(`${p.file}:${p.line}: ${p.message}`);
  console.log(problems.length === 0 ? 'docs: every ts block type-checks and every relative link resolves' : `docs: ${problems.length} problem(s)`);
  process.exitCode = problems.length === 0 ? 0 : 1;
}
