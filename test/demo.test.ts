/**
 * `npm run demo` with short settings, so it cannot rot: on the embedded default, and with a
 * throwaway Redis for the multi-process part. Asserts on the numbers in its tables (origin
 * calls, answers, X-Cache outcomes), never on timings.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { freePort } from '../tools/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { runToEnd } from './fixtures/examples-process.js';
import { killAllChildren } from '../tools/child-process.js';

const DEMO = 'demo/demo.ts';

const redis = useRedis();
afterAll(async () => {
  await killAllChildren();
});

/** The cells of every table row labelled `label`, in the order printed. */
function rows(output: string, label: string): string[][] {
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s{3,}/))
    .filter((cells) => cells[0] === label)
    .map((cells) => cells.slice(1));
}

function numbers(cells: string[] | undefined): number[] {
  return (cells ?? []).map((c) => (c === '—' ? Number.NaN : Number(c)));
}

describe('npm run demo', () => {
  test('in one process: the unprotected herd queries the origin once per request, dogpileGuard once, then the cache answers', async () => {
    const run = await runToEnd(DEMO, ['--herd', '50', '--quick']);
    expect(run, run.stdout + run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).not.toContain('\u001b['); // no colour codes when not on a terminal
    expect(run.stdout).toContain('One process: 50 concurrent requests for one uncached report');
    expect(run.stdout).toContain('set REDIS_URL or pass --redis URL');

    const [none, cold, cached] = numbers(rows(run.stdout, 'origin (DB) calls')[0]);
    expect(none).toBe(50); // every request queried the database
    expect(cold).toBe(1);
    expect(cached).toBe(0);
    expect(rows(run.stdout, 'requests answered')[0]).toEqual(['50/50', '50/50', '50/50']);

    const miss = numbers(rows(run.stdout, 'X-Cache: MISS')[0]);
    const coalesced = numbers(rows(run.stdout, 'X-Cache: COALESCED')[0]);
    const hit = numbers(rows(run.stdout, 'X-Cache: HIT')[0]);
    expect(miss[0]).toBeNaN(); // no X-Cache header without protection
    expect(miss[1]).toBe(1);
    expect(coalesced[1]! + hit[1]!).toBe(49);
    expect(coalesced[1]).toBeGreaterThan(0);
    expect([miss[2], coalesced[2], hit[2]]).toEqual([0, 0, 50]);
    for (const label of ['latency p50', 'latency p99', 'latency max']) {
      expect(rows(run.stdout, label)[0]).toEqual([expect.stringMatching(/ ms$/), expect.stringMatching(/ ms$/), expect.stringMatching(/ ms$/)]);
    }
    expect(run.stdout).toContain('Without protection the database ran 50 queries for the same report');
    expect(run.stdout).toContain('With dogpileGuard() it ran 1 query');
    // Nothing from the multi-process part without a Redis.
    expect(run.stdout).not.toContain('worker processes sharing Redis');
  });

  test('with Redis: in-process protection queries the origin once per worker, the shared cache once in all', async () => {
    const run = await runToEnd(DEMO, ['--herd', '48', '--quick', '--workers', '3'], { REDIS_URL: redis.url });
    expect(run, run.stdout + run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain(`3 worker processes sharing Redis (${redis.url}): 48 requests spread over them`);

    const origin = rows(run.stdout, 'origin (DB) calls');
    expect(origin).toHaveLength(2); // the one-process table, then the multi-process one
    expect(numbers(origin[0])).toEqual([48, 1, 0]);
    const [none, local, shared] = numbers(origin[1]);
    expect(none).toBe(48);
    expect(local).toBe(3); // once per process
    expect(shared).toBe(1); // once across all of them
    const perWorker = rows(run.stdout, 'per worker')[0]!;
    expect(perWorker[0]).toBe('16 + 16 + 16');
    expect(perWorker[1]).toBe('1 + 1 + 1');
    expect(perWorker[2]!.split(' + ').map(Number).sort()).toEqual([0, 0, 1]);
    expect(rows(run.stdout, 'requests answered')[1]).toEqual(['48/48', '48/48', '48/48']);
    const miss = numbers(rows(run.stdout, 'X-Cache: MISS')[1]);
    expect([miss[1], miss[2]]).toEqual([3, 1]);
    expect(run.stdout).toContain('With the cache shared through Redis the workers coordinate: 1 query across all 3 workers.');

    // The run cleaned up after itself: no demo keys left behind, no worker still running.
    expect(await redis.command('KEYS', 'dogpile-demo:*')).toEqual([]);
  });

  test('a Redis that cannot be reached fails at once with a clear message', async () => {
    const port = await freePort();
    const run = await runToEnd(DEMO, ['--quick', '--redis', `redis://127.0.0.1:${port}`]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot reach Redis at redis://127.0.0.1:${port}`);
    expect(run.stdout).not.toContain('One process');
  });

  test('bad options print the usage and exit 2', async () => {
    const run = await runToEnd(DEMO, ['--herd', 'many']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--herd must be a whole number');
    expect(run.stderr).toContain('Usage: npm run demo -- [options]');
  });
});
