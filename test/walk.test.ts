/**
 * The walk of `getOrCompute`'s key on the Redis route (tools/walk.ts, also `npm run walk`):
 * one cold call against a real Redis, every src function instrumented; the calls that receive
 * the key visit each file at most twice (the protocol asks the store for a step, not a verb).
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { root } from '../tools/child-process.js';

describe('the walk of a cold getOrCompute on Redis', () => {
  it('visits each file at most twice with the key', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(root, 'tools', 'walk.ts')], { cwd: root, timeout: 60_000 }).catch((error: { stdout?: string; message: string }) => {
      throw new Error(`tools/walk.ts failed: ${error.message}\n${error.stdout ?? ''}`);
    });
    const keyWalk = stdout.slice(stdout.indexOf("the key's walk: the calls"));
    // The walk did go to Redis and back: the lookup-or-lead script and the commit ran.
    for (const file of ['core/cache.ts', 'store/redis-backend.ts', 'redis/lua-script.ts', 'core/lead.ts', 'store/codec.ts']) expect(keyWalk).toContain(file);
    expect(stdout).toMatch(/the key's walk: 0 of \d+ files visited more than twice/);
  }, 90_000);
});
