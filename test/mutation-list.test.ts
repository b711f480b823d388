/**
 * The mutation guard's list (test/mutations/list.ts) follows the code: `npm run mutate` runs on
 * request, so a change that moves the code a mutation breaks would otherwise leave that
 * mutation stale, and the mechanism unguarded, until someone runs it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MUTATIONS, occurrences } from './mutations/list.js';

describe('the mutation guard', () => {
  it("every mutation still targets its code: its search string occurs exactly once in its file, and its test files exist", () => {
    const problems: string[] = [];
    for (const m of MUTATIONS) {
      const found = existsSync(m.file) ? occurrences(readFileSync(m.file, 'utf8'), m.search) : 0;
      if (found !== 1) problems.push(`${m.id}: its search string occurs ${found} times in ${m.file}; update its entry in test/mutations/list.ts`);
      for (const file of m.tests) if (!existsSync(file)) problems.push(`${m.id}: no test file ${file}`);
    }
    expect(problems).toEqual([]);
    expect(new Set(MUTATIONS.map((m) => m.id)).size).toBe(MUTATIONS.length);
  });
});
