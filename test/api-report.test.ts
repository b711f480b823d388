/**
 * The public API is visible in review: api/dogpile-guard.api.md is what tools/api-report.ts
 * reads from the built .d.ts of every entry of the exports map, and this test fails while the
 * committed file differs (`npm run api:update` rewrites it). The tool is shown to see a change
 * of an exported declaration and of a type that entries use without exporting it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { apiReport, buildIsStale, entries, REPORT, ROOT } from '../tools/api-report.js';

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('the API report', () => {
  it('is up to date with the build (npm run api:update rewrites it)', () => {
    if (buildIsStale()) execFileSync('npx', ['tsup'], { cwd: ROOT, stdio: 'ignore' });
    const committed = readFileSync(path.join(ROOT, REPORT), 'utf8');
    expect(apiReport(), `${REPORT} differs from the build: run npm run api:update and review the diff`).toBe(committed);
  }, 120_000);

  it('shows no internal type: every type a public signature names is exported', () => {
    const committed = readFileSync(path.join(ROOT, REPORT), 'utf8');
    const hidden = committed.split('## Used by the entries, not exported')[1];
    expect(hidden, 'export these types or write them inline in the public signature').toBeUndefined();
  });

  it('covers every entry of the exports map', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const subpaths = Object.keys(pkg.exports).filter((s) => s !== './package.json');
    expect(entries().map((e) => e.name)).toEqual(subpaths.map((s) => (s === '.' ? 'dogpile-guard' : `dogpile-guard${s.slice(1)}`)));
    const committed = readFileSync(path.join(ROOT, REPORT), 'utf8');
    for (const entry of entries()) expect(committed).toContain(`## \`${entry.name}\``);
  });

  it('changes when an exported declaration or a type it uses changes', () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'dogpile-api-'));
    scratch.push(root);
    mkdirSync(path.join(root, 'dist', 'sub'), { recursive: true });
    const pkg = {
      name: 'demo-pkg',
      type: 'module',
      exports: { '.': { import: { types: './dist/index.d.ts' } }, './sub': { import: { types: './dist/sub/index.d.ts' } }, './package.json': './package.json' },
    };
    writeFileSync(path.join(root, 'package.json'), JSON.stringify(pkg));
    const write = (hidden: string, signature: string) => {
      writeFileSync(path.join(root, 'dist', 'chunk-A1.d.ts'), `interface Options$1 { ${hidden} }\nexport { type Options$1 as O };\n`);
      writeFileSync(path.join(root, 'dist', 'index.d.ts'), `import { O as Options } from './chunk-A1.js';\n/** doc */\ndeclare function make(${signature}): void;\nexport { make, make as default };\n`);
      writeFileSync(path.join(root, 'dist', 'sub', 'index.d.ts'), `declare class Thing {\n    private secret;\n    run(): number;\n}\nexport { Thing };\n`);
    };
    write('ttl: number;', 'options: Options');
    const before = apiReport(root);
    expect(before).toContain('## `demo-pkg`');
    expect(before).toContain('## `demo-pkg/sub`');
    expect(before).toContain('// exported as default\ndeclare function make(options: Options): void;');
    expect(before).toContain('interface Options {\n    ttl: number;\n}');
    expect(before).not.toContain('doc');
    expect(before).not.toContain('secret');

    write('ttl: string;', 'options: Options');
    const hiddenChanged = apiReport(root);
    expect(hiddenChanged).not.toBe(before);
    expect(hiddenChanged).toContain('ttl: string;');

    write('ttl: number;', 'options?: Options');
    expect(apiReport(root)).toContain('declare function make(options?: Options): void;');
  });
});
