/**
 * Checks the packed tarball as the registry would receive it: `npm pack` into a scratch
 * directory, then publint (the package.json fields and the files they point to) and
 * @arethetypeswrong/cli (types that resolve, and match the JavaScript, under Node's ESM and
 * CommonJS resolution and bundlers). Exits non-zero when either reports a problem.
 *
 *   npm run check:package      # after npm run build
 *
 * attw runs with `--profile node16`: the pre-exports `node10` resolution cannot see subpaths
 * such as `dogpile-guard/express`, and the package requires Node 20 (`engines`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

function run(command: string, args: string[], cwd = root): { status: number; stdout: string } {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return { status: result.status ?? 1, stdout: result.stdout ?? '' };
}

if (!existsSync(path.join(root, 'dist', 'index.js'))) {
  console.error('dist/ is missing: run npm run build first');
  process.exit(1);
}
const scratch = mkdtempSync(path.join(os.tmpdir(), 'dogpile-pack-'));
let failed = false;
try {
  const packed = run('npm', ['pack', '--silent', '--pack-destination', scratch]);
  const tarball = path.join(scratch, packed.stdout.trim().split('\n').pop()!);
  if (packed.status !== 0 || !existsSync(tarball)) throw new Error('npm pack failed');

  console.log(`publint ${path.basename(tarball)}`);
  const publint = run(bin('publint'), ['run', tarball, '--strict']);
  process.stdout.write(publint.stdout);
  failed ||= publint.status !== 0;

  console.log(`attw ${path.basename(tarball)}`);
  const attw = run(bin('attw'), [tarball, '--profile', 'node16', '--format', 'ascii']);
  process.stdout.write(attw.stdout);
  failed ||= attw.status !== 0;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
console.log(failed ? 'package checks: FAILED' : 'package checks: publint and attw pass');
process.exitCode = failed ? 1 : 0;
