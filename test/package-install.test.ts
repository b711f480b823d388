/**
 * What `npm install dogpile-guard` gives a new project: the packed tarball installed with npm
 * into an empty project on this Node (the CI's Node 20 included) prints no engine warning; the
 * tarball is the size the README says, carries a LICENSE and no source map without its source.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { root } from '../tools/child-process.js';
import { buildIsStale } from '../tools/built-package.js';

let scratch: string;
let tarball: string;

beforeAll(() => {
  if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
  scratch = mkdtempSync(path.join(os.tmpdir(), 'dogpile-install-'));
  const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', scratch], { cwd: root }).toString().trim().split('\n').pop()!;
  tarball = path.join(scratch, packed);
}, 400_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('npm install <tarball> into an empty project', () => {
  it('installs on this Node without an EBADENGINE warning, and the package loads', async () => {
    const project = path.join(scratch, 'empty-project');
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'empty-project', version: '1.0.0', private: true }));
    // The npm next to this Node, as a user of this Node would run it.
    const npm = await run([npmCli(), 'install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel', 'warn', tarball], project, 150_000);
    const output = `${npm.stdout}\n${npm.stderr}`;
    expect(npm.code, output).toBe(0);
    expect(output).not.toMatch(/EBADENGINE|Unsupported engine/);
    // The synthetic request of a background refresh is built in-house: no injector comes with the package.
    expect(existsSync(path.join(project, 'node_modules', 'light-my-request'))).toBe(false);
    const consumer = await run(['--input-type=module', '-e', "import { createCache } from 'dogpile-guard'; console.log(await createCache().getOrCompute('k', () => 'installed', 1000));"], project, 30_000);
    expect(consumer.code, consumer.stderr).toBe(0);
    expect(consumer.stdout.trim()).toBe('installed');
  }, 180_000);

  it('is the size the README gives beside its install line (within a tenth)', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const claim = /^npm install dogpile-guard\s+# (\d+(?:\.\d+)?) kB packed, measured with npm pack --dry-run$/m.exec(readme);
    expect(claim, 'README: `npm install dogpile-guard  # N kB packed, measured with npm pack --dry-run`').not.toBeNull();
    const packedKb = statSync(tarball).size / 1000;
    expect(Math.abs(packedKb - Number(claim![1])) / packedKb, `packed ${packedKb.toFixed(1)} kB, README says ${claim![1]} kB`).toBeLessThan(0.1);
  });

  it('ships the MIT LICENSE that package.json names', () => {
    const files = execFileSync('tar', ['-tzf', tarball]).toString().split('\n').filter(Boolean);
    expect(files).toContain('package/LICENSE');
    const license = execFileSync('tar', ['-xzOf', tarball, 'package/LICENSE']).toString();
    expect(license).toMatch(/^MIT License/);
    expect(license).toContain('dogpile-guard contributors');
    expect((JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { license: string }).license).toBe('MIT');
  });

  it('ships no source map without the sources it maps to', () => {
    const files = execFileSync('tar', ['-tzf', tarball]).toString().split('\n').filter(Boolean);
    for (const map of files.filter((f) => f.endsWith('.map'))) {
      const { sources } = JSON.parse(execFileSync('tar', ['-xzOf', tarball, map]).toString()) as { sources: string[] };
      for (const source of sources) expect(files, `${map} names ${source}`).toContain(path.posix.join(path.posix.dirname(map), source));
    }
  });
});

/** Runs this Node with `args` in `cwd`, killed after `timeoutMs`; resolves with its exit code and whole output. */
function run(args: string[], cwd: string, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

/** npm's CLI script beside this Node (the one `npm` runs). */
function npmCli(): string {
  const beside = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
  if (existsSync(beside)) return beside;
  return path.join(execFileSync('npm', ['root', '-g']).toString().trim(), 'npm', 'bin', 'npm-cli.js');
}

