/**
 * The quick starts run as written. The "## Quick start" sections of README.md and
 * docs/getting-started.md are read here (so the pages and this test cannot drift): under each
 * "### " heading, one `npm install ...` line, then the files to save (each block's first line
 * says `// save as <file>`, one of them adds `, run with: node ...`). In a fresh project under a
 * temporary directory, the install line runs with the packed tarball in place of
 * `dogpile-guard`; then the command runs on this Node (20) and on Node 24 (`node@24` from npx).
 *
 * - A server, after one request for another key, gets a cold burst of 50 concurrent requests
 *   to its slow route: exactly one `MISS`, the other 49 `COALESCED`.
 * - A script (the direct calls) exits 0 by itself within 10 s, with no `REDIS_URL`, and opens no
 *   socket at all (a preload reports every `net.Socket#connect`), so it cannot reach a Redis on
 *   127.0.0.1:6379 or anywhere else.
 *
 * Installs use `--prefer-offline` and npm's own cache; one project per distinct quick start
 * serves both Node versions.
 */
import { execFileSync, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeChild, killAllChildren, root } from '../tools/child-process.js';
import { codeBlocks } from '../tools/docs-check.js';
import { fetchReply } from '../tools/http-client.js';
import { monotonicNow } from '../src/shared/clock.js';
import { buildIsStale } from '../tools/built-package.js';
import { freePort } from '../tools/redis-server.js';

const PAGES = ['README.md', 'docs/getting-started.md'];
/** The route a server quick start answers slowly, by heading (the rest serve `/report`). */
const ROUTES: Record<string, string> = { NestJS: '/users/42' };
const BURST = 50;

interface QuickStart {
  page: string;
  heading: string;
  /** The packages of the `npm install` line. */
  packages: string[];
  files: { name: string; code: string }[];
  /** The command's arguments after `node` (after `npx -y bun` or `npx -y deno` for Bun and Deno). */
  args: string[];
  /** What runs it: Node 20 and 24 for `node ...`, else Bun or Deno from the registry (`npx -y bun ...`, `npx -y deno ...`). */
  runtimes: Runtime[];
  server: boolean;
}

type Runtime = 'node20' | 'node24' | 'bun' | 'deno';

/** The runtimes a quick start's command runs on, or undefined for a command this test does not know. */
function runtimesOf(command: string): Runtime[] | undefined {
  if (command.startsWith('node ')) return ['node20', 'node24'];
  if (command.startsWith('npx -y bun ')) return ['bun'];
  if (command.startsWith('npx -y deno ')) return ['deno'];
  return undefined;
}

/** The quick starts of one page, and what keeps one from being run as written. */
function quickStarts(page: string, markdown: string): { found: QuickStart[]; problems: string[] } {
  const found: QuickStart[] = [];
  const problems: string[] = [];
  const section = /^## Quick start\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(markdown)?.[1];
  if (!section) return { found, problems: [`${page}: no "## Quick start" section`] };
  for (const part of section.split(/^### /m).slice(1)) {
    const heading = part.slice(0, part.indexOf('\n')).trim();
    const where = `${page} "### ${heading}"`;
    const blocks = codeBlocks(page, part.slice(part.indexOf('\n') + 1));
    const install = blocks[0];
    const installLine = install && /^(sh|shell|bash)$/.test(install.info) ? install.code.trim() : '';
    if (!/^npm install [^\n]+$/.test(installLine)) {
      problems.push(`${where}: its first block is not one \`npm install ...\` line`);
      continue;
    }
    const files: QuickStart['files'] = [];
    let command: string | undefined;
    for (const block of blocks.slice(1)) {
      const first = /^\/\/ save as (\S+?)(?:, run with: (.+))?$/.exec(block.code.split('\n')[0]!);
      if (!first) {
        problems.push(`${where}: a block does not start with "// save as <file>"`);
        continue;
      }
      files.push({ name: first[1]!, code: block.code + '\n' });
      if (first[2]) command = first[2].trim();
    }
    const runtimes = command === undefined ? undefined : runtimesOf(command);
    if (command === undefined || runtimes === undefined) {
      problems.push(`${where}: no block says ", run with: node ..." (or npx -y bun ..., npx -y deno ...)`);
      continue;
    }
    const packages = installLine.split(/\s+/).slice(2);
    if (!packages.includes('dogpile-guard')) problems.push(`${where}: the install line does not name dogpile-guard`);
    const code = files.map((f) => f.code).join('\n');
    const words = command.split(/\s+/);
    found.push({ page, heading, packages, files, args: words.slice(words[0] === 'npx' ? 3 : 1), runtimes, server: /\.listen\(|\bserve\(/i.test(code) });
  }
  if (found.length === 0) problems.push(`${page}: no quick start found`);
  return { found, problems };
}

const parsed = PAGES.map((page) => quickStarts(page, readFileSync(path.join(root, page), 'utf8')));
const problems = parsed.flatMap((p) => p.problems);
/** Each distinct quick start once (a page may show the same one as another). */
const distinct = new Map<string, QuickStart>();
for (const q of parsed.flatMap((p) => p.found)) {
  const id = JSON.stringify([q.packages, q.files, q.args]);
  if (!distinct.has(id)) distinct.set(id, q);
}
const cases = [...distinct.values()].map((q) => [`${q.page} ${q.heading}`, q] as const);

let work: string;
let tarball: string;
const projects = new Map<QuickStart, string>();
const nodes: Record<string, string> = {};
/** Written into every child's environment: npm's settings from the runner out, no Redis URL. */
let env: NodeJS.ProcessEnv;
const run = promisify(execFile);

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'dogpile-quickstarts-'));
  env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== 'REDIS_URL' && k !== 'NODE_OPTIONS'));
  tarball = pack(work);
  nodes.node20 = process.execPath;
  nodes.node24 = (await run('npx', ['-y', '-p', 'node@24', '-c', 'command -v node'], { cwd: work, env, encoding: 'utf8' })).stdout.trim();
  // Bun and Deno as `npx -y bun` / `npx -y deno` run them, started directly (stopping npx would
  // leave the runtime it started behind).
  for (const runtime of ['bun', 'deno']) {
    nodes[runtime] = (await run('npx', ['-y', '-p', runtime, '-c', `command -v ${runtime}`], { cwd: work, env, encoding: 'utf8' })).stdout.trim();
  }
  let n = 0;
  for (const [, q] of cases) {
    const dir = path.join(work, `project-${n++}`);
    mkdirSync(dir);
    for (const file of q.files) writeFileSync(path.join(dir, file.name), file.code);
    const packages = q.packages.map((p) => (p === 'dogpile-guard' ? tarball : p));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...packages], { cwd: dir, env, encoding: 'utf8' });
    projects.set(q, dir);
  }
  writeFileSync(path.join(work, 'report-sockets.mjs'), REPORT_SOCKETS);
}, 300_000);

afterAll(async () => {
  await killAllChildren();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Prints every outgoing connection a process opens (preloaded with --import). */
const REPORT_SOCKETS = `import net from 'node:net';
const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  process.stderr.write('socket opened: ' + JSON.stringify(args[0] ?? null) + '\\n');
  return connect.apply(this, args);
};
`;

it('every quick start names its install line, its files and how to run it', () => {
  expect(problems).toEqual([]);
  expect(cases.length).toBeGreaterThanOrEqual(5);
});

describe.each(cases)('%s', (_name, q) => {
  it.each(q.runtimes)(`runs as written on %s${q.server ? `: a cold burst of ${BURST} gets one MISS, the rest COALESCED` : ', exits 0 by itself and opens no socket'}`, async (version) => {
    const cwd = projects.get(q)!;
    if (!q.server) {
      const child = new NodeChild(version, ['--import', path.join(work, 'report-sockets.mjs'), ...q.args], { command: nodes[version], cwd, env, stdin: 'ignore' });
      const exit = await child.waitExit(10_000);
      expect(child.stderr).not.toMatch(/socket opened/);
      expect(exit, child.stderr).toEqual({ code: 0, signal: null });
      expect(child.stdout).toMatch(/Ada Lovelace/);
      return;
    }
    const port = await freePort();
    const child = new NodeChild(version, q.args, { command: nodes[version], cwd, env: { ...env, PORT: String(port) }, stdin: 'ignore' });
    try {
      await listening(child, port, 60_000);
      const route = ROUTES[q.heading] ?? '/report';
      // One request first, for another key (the query is part of it): the burst then measures
      // the cache, not a server's first request (compiling, loading modules).
      expect((await fetchReply(port, `${route}?warm-up=1`, { timeoutMs: 30_000 })).xCache).toBe('MISS');
      const replies = await Promise.all(Array.from({ length: BURST }, () => fetchReply(port, route, { timeoutMs: 30_000 })));
      expect(replies.map((r) => r.status)).toEqual(Array(BURST).fill(200));
      const outcomes: Record<string, number> = {};
      for (const r of replies) outcomes[r.xCache ?? 'none'] = (outcomes[r.xCache ?? 'none'] ?? 0) + 1;
      expect(outcomes).toEqual({ MISS: 1, COALESCED: BURST - 1 });
    } finally {
      await child.stop('SIGTERM', 10_000);
    }
  }, 120_000);
});

/** Resolves once `port` accepts connections; rejects when the child exits first or after `timeoutMs` (monotonic). */
async function listening(child: NodeChild, port: number, timeoutMs: number): Promise<void> {
  const deadline = monotonicNow() + timeoutMs;
  for (;;) {
    if (!child.running) throw new Error(`${child.label} exited before listening:\n${child.stdout}\n${child.stderr}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => (socket.destroy(), resolve(false)));
    });
    if (open) return;
    if (monotonicNow() > deadline) throw new Error(`${child.label} did not listen on ${port} within ${timeoutMs} ms:\n${child.stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}


/**
 * `npm pack` of the package into `dir`. A fresh dist/ is packed as it is; a stale or missing
 * one is not rebuilt in place (others may be using it): the JavaScript is built into a copy
 * of the package under `dir` (no declarations: the quick starts only run) and that is packed.
 */
function pack(dir: string): string {
  let from = root;
  if (buildIsStale()) {
    from = path.join(dir, 'package');
    mkdirSync(from);
    const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { files?: string[] };
    for (const entry of manifest.files ?? []) if (entry !== 'dist' && existsSync(path.join(root, entry))) cpSync(path.join(root, entry), path.join(from, entry), { recursive: true });
    cpSync(path.join(root, 'package.json'), path.join(from, 'package.json'));
    execFileSync('npx', ['tsup', '--no-dts', '--out-dir', path.join(from, 'dist')], { cwd: root, env, stdio: 'ignore' });
  }
  const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: from, env }).toString().trim().split('\n').pop()!;
  return path.join(dir, name);
}

