/**
 * The HTTP adapters translate; the pipeline in src/http/ decides. An adapter turns its
 * framework's request into the pipeline's, runs the handler where the pipeline says, and applies
 * the instructions it gets back (`LeaderHead`, `servedInstructions`, `PassThrough`). So no
 * adapter names a caching header field or imports a module that holds an HTTP caching rule: a
 * fix to a rule is made once, in src/http/, and every adapter has it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');

/** The adapters built on the pipeline, each file of them. */
const ADAPTERS = ['src/express/index.ts', 'src/fastify/index.ts', 'src/fastify/replay.ts', 'src/koa/index.ts', 'src/hono/index.ts', 'src/fetch/index.ts'];

/** Every file of the Nest module. */
const NEST_FILES = (readdirSync(path.join(root, 'src/nest'), { recursive: true }) as string[]).filter((name) => name.endsWith('.ts')).map((name) => `src/nest/${name}`);

/** Header fields whose meaning is the pipeline's to apply (RFC 9111, RFC 9211, RFC 9110 §13, this cache's own fields). */
const CACHING_FIELDS = ['cache-status', 'x-cache', 'age', 'cache-control', 'expires', 'etag', 'last-modified', 'if-none-match', 'if-modified-since', 'if-range', 'range', 'content-range', 'vary', 'dogpile-cache-control', 'dogpile-tags', 'set-cookie', 'authorization', 'location', 'content-location'];

/** src/http/ modules that hold a caching rule (freshness, storability, conditionals, ranges, invalidation, status fields). */
const RULE_MODULES = ['cache-status', 'cacheability', 'conditional', 'freshness', 'cache-control', 'range', 'invalidation', 'leader-rules', 'stale-on-error', 'response-format', 'cache-key', 'vary-record'];

/** Source without comments: what the code names, not what its documentation says to users. */
function code(file: string): string {
  return readFileSync(path.join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:])\/\/.*$/gm, '$1');
}

/** Header names written as string literals in `source`. */
function namedFields(source: string): string[] {
  const found: string[] = [];
  for (const match of source.matchAll(/['"`]([A-Za-z-]+)['"`]/g)) {
    const name = match[1]!.toLowerCase();
    if (CACHING_FIELDS.includes(name)) found.push(name);
  }
  return found;
}

describe('the HTTP adapters are translators', () => {
  for (const file of ADAPTERS) {
    it(`${file} names no caching header field and imports no caching rule`, () => {
      const source = code(file);
      expect(namedFields(source)).toEqual([]);
      const imports = [...source.matchAll(/from '\.\.\/http\/([a-z-]+)\.js'/g)].map((m) => m[1]);
      expect(imports.filter((name) => RULE_MODULES.includes(name!))).toEqual([]);
    });
  }

  // Nest's `@Cached` caches the handler's value, which its platform serialises: the value's
  // decision, key, fields and status fields come from the pipeline (http/flow/value-answer.ts). Keys
  // of values a user's key function chose are made by the pipeline's `userCacheKey`.
  for (const file of NEST_FILES) {
    it(`${file} names no caching header field and imports no caching rule but the pipeline's user keys`, () => {
      const source = code(file);
      expect(namedFields(source)).toEqual([]);
      const imports = [...source.matchAll(/from '(?:\.\.\/)+http\/([a-z-]+)\.js'/g)].map((m) => m[1]);
      expect(imports.filter((name) => RULE_MODULES.includes(name!) && name !== 'cache-key')).toEqual([]);
    });
  }

  it('are each small enough to read in a sitting (at most 250 lines)', () => {
    const long = ADAPTERS.map((file) => [file, readFileSync(path.join(root, file), 'utf8').split('\n').length] as const).filter(([, lines]) => lines > 250);
    expect(long).toEqual([]);
  });

  it('the check sees a header field named in code, and not one named in a comment', () => {
    expect(namedFields(`res.setHeader('Cache-Status', x); headers["age"] = 1;`)).toEqual(['cache-status', 'age']);
    expect(namedFields(`// sets 'x-cache'\nconst a = 'content-type';`.replace(/(^|[^:])\/\/.*$/gm, '$1'))).toEqual([]);
  });
});
