/**
 * The documentation holds against the code: every ```ts block of README.md and docs/
 * type-checks as its own module against the package's sources, and every relative link (and
 * its #anchor) resolves. The checker itself is shown to fail on a wrong block and a dead link.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { anchors, checkCodeBlocks, checkDocs, checkLinks, codeBlocks, ROOT, slug } from '../tools/docs-check.js';

describe('README.md and docs/', () => {
  it('every ts block type-checks and every relative link resolves', () => {
    const problems = checkDocs().map((p) => `${p.file}:${p.line}: ${p.message}`);
    expect(problems).toEqual([]);
  });

  it('the documents and sections that comments in src/ cite exist', () => {
    const problems: string[] = [];
    const walk = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
    let cited = 0;
    for (const file of walk('src').filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      for (const m of text.matchAll(/(?:"([^"\n]+)" in )?\b((?:docs\/)?[\w./-]*[A-Za-z]\.md)\b/g)) {
        const [, section, doc] = m as unknown as [string, string | undefined, string];
        cited++;
        if (!existsSync(path.join(ROOT, doc))) {
          problems.push(`${file} cites ${doc}, which is not in the repository`);
          continue;
        }
        if (section && ![...anchors(readFileSync(path.join(ROOT, doc), 'utf8'))].includes(slug(section))) problems.push(`${file} cites "${section}" in ${doc}: no such heading`);
      }
    }
    expect(problems).toEqual([]);
    expect(cited).toBeGreaterThan(0);
  });
});

describe('the docs checker', () => {
  it('reports a block that misuses the API, names its line, and skips partial blocks', () => {
    const text = [
      '# Page',
      '',
      '```ts',
      "import { createCache } from 'dogpile-guard';",
      '',
      "const cache = createCache({ lockTtl: '5s' });",
      "await cache.getOrCompute('k', () => 1, { ttl: '1m', notAnOption: true });",
      '```',
      '',
      '```ts partial',
      'cache.getOrCompute(...)',
      '```',
      '',
      '```ts',
      "import { getOrCompute } from 'dogpile-guard/express';",
      '```',
    ].join('\n');
    const blocks = codeBlocks('docs/example.md', text);
    expect(blocks.map((b) => [b.line, b.info])).toEqual([
      [4, 'ts'],
      [11, 'ts partial'],
      [15, 'ts'],
    ]);
    const problems = checkCodeBlocks(blocks);
    expect(problems.map((p) => p.line)).toEqual([7, 15]);
    expect(problems[0]!.message).toContain('notAnOption');
    expect(problems[1]!.message).toContain('getOrCompute');
  });

  it('reports a missing file, a missing anchor, and accepts what exists', () => {
    const text = [
      'See [the picture](herd.svg), [HTTP caching](http-caching.md), [layers](design.md#layers).',
      'Broken: [gone](nowhere.md) and [no such heading](../README.md#no-such-heading).',
      '`[not a link](inside-code.md)`',
      '```',
      '[not a link either](inside-a-block.md)',
      '```',
    ].join('\n');
    const problems = checkLinks('docs/example.md', text);
    expect(problems.map((p) => [p.line, p.message])).toEqual([
      [2, 'link nowhere.md: docs/nowhere.md does not exist'],
      [2, 'link ../README.md#no-such-heading: no heading #no-such-heading in README.md'],
    ]);
  });

  it('makes anchors as GitHub does', () => {
    expect(slug('Namespaces, `clear()` and bulk calls')).toBe('namespaces-clear-and-bulk-calls');
    expect(slug('OpenTelemetry: `dogpile-guard/otel`')).toBe('opentelemetry-dogpile-guardotel');
    expect(slug('`createCache` options')).toBe('createcache-options');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n<a id="here"></a>')]).toEqual(['a', 'a-1', 'here']);
  });
});
