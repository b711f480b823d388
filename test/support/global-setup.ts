/**
 * Runs once per `vitest run`: checks that `redis-server` is installed, creates a run
 * directory for the servers' pid files, and kills every server left behind at the end,
 * also when a test file crashed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { killRecordedServers, REDIS_MISSING_MESSAGE } from '../../tools/redis-server.js';

export default function setup(): () => void {
  for (const bin of ['redis-server', 'redis-cli']) {
    try {
      execFileSync(bin, ['--version'], { stdio: 'ignore' });
    } catch {
      throw new Error(`${bin}: ${REDIS_MISSING_MESSAGE}`);
    }
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dogpile-guard-run-'));
  process.env.DOGPILE_TEST_RUN_DIR = dir;
  return () => {
    const killed = killRecordedServers(dir);
    rmSync(dir, { recursive: true, force: true });
    if (killed > 0) console.warn(`global teardown stopped ${killed} redis-server process(es) left behind`);
  };
}
