/**
 * Memory per key is bounded in bytes: long unique keys (12 KB URLs) must not make the
 * cache's freshness hints or the HTTP Vary index grow with their length. Measured in a child
 * process with --expose-gc (heap after a full GC), on a real Redis and a real Express app.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { useRedis } from './support/use-redis.js';
import { killAllChildren, NodeChild } from '../tools/child-process.js';

const server = useRedis();
afterEach(killAllChildren);
afterAll(async () => {
  await killAllChildren();
});

async function retainedBytes(mode: 'cache' | 'http', count: number, keyLength: number): Promise<number> {
  const worker = NodeChild.tsx('test/fixtures/key-memory.ts', [JSON.stringify({ url: server.url, mode, count, keyLength })], { nodeArgs: ['--expose-gc'] });
  const line = await worker.waitFor((l) => l.startsWith('{'), 170_000);
  await worker.exited;
  const { retained } = JSON.parse(line) as { retained: number };
  console.log(`${mode}: ${count} keys of ${keyLength} characters retain ${(retained / 1024 / 1024).toFixed(1)} MB`);
  return retained;
}

const MB = 1024 * 1024;

describe('memory per key', () => {
  it('16 000 unique 12 KB keys through a Redis-backed cache leave less than 24 MB (the keys alone are 192 MB)', { timeout: 180_000 }, async () => {
    const retained = await retainedBytes('cache', 16_000, 12_000);
    expect(retained).toBeLessThan(24 * MB);
  });

  it('4 000 unique 12 KB URLs whose responses vary leave less than 24 MB in an Express app (the URLs alone are 48 MB)', { timeout: 180_000 }, async () => {
    const retained = await retainedBytes('http', 4000, 12_000);
    expect(retained).toBeLessThan(24 * MB);
  });
});
