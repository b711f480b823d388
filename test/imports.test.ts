/**
 * The shape of src/ (tools/imports.ts, also `npm run imports`): folders import one way and no
 * file imports itself back through others, type-only imports included.
 */
import { describe, expect, it } from 'vitest';
import { cycles, graph, layerViolations } from '../tools/imports.js';

describe('imports of src/', () => {
  const g = graph();

  it('form no file cycle', () => {
    expect(cycles(g)).toEqual([]);
  });

  it('point down the layers only: core imports nothing from redis/, adapters nothing below core', () => {
    expect(layerViolations(g)).toEqual([]);
  });

  it('the check sees a cycle and a layer skip when there is one', () => {
    const a = '/src/core/a.ts';
    const b = '/src/core/b.ts';
    expect(cycles(new Map([[a, [b]], [b, [a]]])).length).toBe(1);
    expect(cycles(new Map([[a, [b]], [b, []]]))).toEqual([]);
  });
});
