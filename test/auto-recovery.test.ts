/**
 * `autoRecovery`: `delete`, `deleteMany`, `invalidateTags` and `clear` made while Redis is
 * unreachable (its process frozen, or stopped and started again empty) resolve at once, drop
 * this process's copies, and are replayed in order once Redis answers — announced then, so a
 * second cache on its own connections drops its L1 copies too. Meanwhile this cache reads no
 * stale copy from Redis; a `set` made after them lands after them. The queue is bounded
 * (`maxQueue`). Without the option the calls reject with `BackendError`, as before. Bad options
 * are refused naming them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { BackendError, createCache, InvalidOptionError, type DogpileCache } from '../src/index.js';
import { RedisServer } from '../tools/redis-server.js';
import { freshId } from '../tools/basics.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => Promise<boolean> | boolean, boundMs = 10_000): Promise<boolean> {
  const deadline = performance.now() + boundMs;
  while (performance.now() < deadline) {
    if (await check()) return true;
    await pause(25);
  }
  return false;
}

describe('autoRecovery', () => {
  let server: RedisServer | undefined;
  const caches: DogpileCache[] = [];
  afterEach(async () => {
    server?.thaw();
    await Promise.all(caches.splice(0).map((c) => c.close()));
    await server?.stop();
    server = undefined;
  });

  async function setup(options: Record<string, unknown> = {}) {
    server = await new RedisServer().start();
    const prefix = freshId('recover');
    const base = { prefix, commandTimeout: 200, backendCooldown: 100, l1: true };
    const a = createCache({ ...base, redis: server.client({ maxRetriesPerRequest: null }), autoRecovery: true, ...options });
    const b = createCache({ ...base, redis: server.client({ maxRetriesPerRequest: null }) });
    caches.push(a, b);
    return { a, b, prefix, raw: server.client() };
  }

  it('a delete while Redis is frozen resolves, drops the copy here at once, and lands (announced) once Redis answers', async () => {
    const { a, b, prefix, raw } = await setup();
    await a.set('k', 'v1', 60_000);
    // Read until the other cache serves its L1 copy (kept once its channel is followed).
    expect(await until(async () => (await b.getOrCompute('k', () => 'never', 60_000)) === 'v1' && b.peek('k') === 'v1')).toBe(true);
    server!.freeze();
    expect(await a.delete('k')).toBe(false);
    expect(a.peek('k')).toBeUndefined();
    // While it waits, this cache does not read Redis: the loader answers.
    expect(await a.getOrCompute('k', () => 'computed while down', 60_000)).toBe('computed while down');
    server!.thaw();
    expect(await until(async () => (await raw.exists(`${prefix}:v:{k}`)) === 0)).toBe(true);
    // The replay was announced: the other cache's L1 copy is gone.
    expect(await until(() => b.peek('k') === undefined)).toBe(true);
    expect(await b.getOrCompute('k', () => 'v2', 60_000)).toBe('v2');
  });

  it('a set made after a queued delete lands after it', async () => {
    const { a, raw, prefix } = await setup();
    await a.set('k', 'v1', 60_000);
    server!.freeze();
    await a.delete('k');
    // Redis answers again; the set comes before the replay timer fires: it replays the delete first.
    server!.thaw();
    await a.set('k', 'v3', 60_000);
    expect(await until(async () => (await raw.exists(`${prefix}:v:{k}`)) === 1)).toBe(true);
    await pause(300);
    expect(await a.get('k')).toBe('v3');
  });

  it('invalidateTags and clear made while Redis is stopped are replayed after it starts again (empty)', async () => {
    const { a, b, prefix, raw } = await setup();
    await a.set('tagged', 't1', { ttl: 60_000, tags: ['team'] });
    expect(await b.getOrCompute('tagged', () => 'never', 60_000)).toBe('t1');
    await server!.kill();
    await a.invalidateTags(['team']);
    await a.clear({ stale: false });
    expect(a.peek('tagged')).toBeUndefined();
    await server!.restart();
    // Replayed in order: the tag's stamp and the cache's generation stamp are written again.
    expect(await until(async () => (await raw.keys(`${prefix}:*`)).some((key) => key.startsWith(`${prefix}:t:`)), 15_000)).toBe(true);
    expect(await until(async () => (await raw.keys(`${prefix}:*`)).some((key) => key.startsWith(`${prefix}:g:`)), 15_000)).toBe(true);
    expect(await b.getOrCompute('tagged', () => 'reloaded', { ttl: 60_000, tags: ['team'] })).toBe('reloaded');
  });

  it('the queue is bounded: past maxQueue an invalidation rejects with BackendError naming the bound', async () => {
    const { a } = await setup({ autoRecovery: { maxQueue: 2 } });
    server!.freeze();
    await a.delete('x');
    await a.deleteMany(['y', 'z']);
    await expect(a.delete('w')).rejects.toBeInstanceOf(BackendError);
    await expect(a.delete('w')).rejects.toThrow(/maxQueue/);
    server!.thaw();
  });

  it('without autoRecovery a delete while Redis is frozen rejects with BackendError', async () => {
    const { b } = await setup();
    server!.freeze();
    await expect(b.delete('k')).rejects.toBeInstanceOf(BackendError);
    server!.thaw();
  });

  it('refuses bad options naming them', () => {
    for (const [value, option] of [['yes', 'autoRecovery'], [{ maxQueue: 0 }, 'autoRecovery.maxQueue'], [{ maxQueue: 1.5 }, 'autoRecovery.maxQueue'], [{ max: 3 }, 'autoRecovery.max']] as const) {
      expect(() => createCache({ autoRecovery: value as never })).toThrow(InvalidOptionError);
      try {
        createCache({ autoRecovery: value as never });
      } catch (error) {
        expect((error as InvalidOptionError).option).toBe(option);
      }
    }
  });
});
