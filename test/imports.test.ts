/**
 * The shape of src/ (tools/imports.ts, also `npm run imports`): folders import one way and no
 * file imports itself back through others, type-only imports included.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cycles, graph, httpPartViolations, layerViolations } from '../tools/imports.js';
import { root } from '../tools/child-process.js';

const src = path.join(root, 'src');

describe('imports of src/', () => {
  const g = graph();

  it('form no file cycle', () => {
    expect(cycles(g)).toEqual([]);
  });

  it('point down the layers only: core imports nothing from redis/, adapters nothing below core', () => {
    expect(layerViolations(g)).toEqual([]);
  });

  it('inside http/: the pure rules import no value from the flow, the exchanges or the adapters\' contract; the flow imports no exchange', () => {
    expect(httpPartViolations([...g.keys()])).toEqual([]);
  });

  it('the http/ check sees a rule importing a value of the flow, and lets a type-only import through', () => {
    const rule = path.join(src, 'http', 'rules', 'probe.ts');
    const texts: Record<string, string> = {
      [rule]: "import type { PreparedResponse } from '../flow/serve.js';\nimport { prepareResponse } from '../flow/serve.js';\n",
    };
    const found = httpPartViolations([rule], (file) => texts[file]!);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain('http/rules/probe.ts imports http/flow/serve.ts');
    texts[rule] = "import type { PreparedResponse } from '../flow/serve.js';\n";
    expect(httpPartViolations([rule], (file) => texts[file]!)).toEqual([]);
  });

  it('the check sees a cycle and a layer skip when there is one', () => {
    const a = '/src/core/a.ts';
    const b = '/src/core/b.ts';
    expect(cycles(new Map([[a, [b]], [b, [a]]])).length).toBe(1);
    expect(cycles(new Map([[a, [b]], [b, []]]))).toEqual([]);
  });
});
