/**
 * A delete is stamped with the Redis server's time, not the deleting process's: real child
 * processes, one whose wall clock runs seconds ahead (`shifted-clock.ts`). It deletes a key,
 * another process then sets it, and a third process, which follows the key in its L1, serves
 * the set value from its L1 within one pub/sub delivery. Had the delete been stamped with the
 * ahead clock, every process would take the set value as older than the delete and refuse to
 * keep it for as long as the clocks disagree.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonChild, killAllChildren, root, type Message } from '../tools/child-process.js';
import { freshId, waitUntil } from '../tools/basics.js';
import { useRedis } from './support/use-redis.js';

/** "Within one pub/sub delivery", as checked here: far above a delivery on a loaded machine, far below the shift. */
const DELIVERY_BOUND_MS = 1_000;
/** How far ahead the deleting process's wall clock runs. */
const SHIFT_MS = 5_000;

const server = useRedis();

afterAll(killAllChildren);

function worker(label: string, shift: number): JsonChild {
  const config = { url: server.url, ttl: 60_000, staleWhileRevalidate: 0, l1Ttl: 60_000 };
  return new JsonChild(
    label,
    ['--import', 'tsx', '--import', path.join(root, 'test/fixtures/shifted-clock.ts'), path.join(root, 'test/fixtures/clock-worker.ts'), JSON.stringify(config)],
    { cwd: root, env: { ...process.env, DOGPILE_CLOCK_SHIFT_MS: String(shift) } },
  );
}

async function ask(w: JsonChild, command: Record<string, unknown>): Promise<Message> {
  w.send(command);
  return w.take('done', 10_000);
}

describe('a delete from a process whose wall clock runs ahead', () => {
  let ahead: JsonChild;
  let setter: JsonChild;
  let reader: JsonChild;

  beforeAll(async () => {
    ahead = worker('clock-ahead', SHIFT_MS);
    setter = worker('clock-setter', 0);
    reader = worker('clock-reader', 0);
    await Promise.all([ahead, setter, reader].map((w) => w.take('ready', 30_000)));
    // The shift is real: the deleting process's wall clock runs seconds ahead of the others'.
    const [a, b] = [await ask(ahead, { cmd: 'clock' }), await ask(reader, { cmd: 'clock' })];
    expect((a.wall as number) - (b.wall as number)).toBeGreaterThan(SHIFT_MS - 500);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([ahead, setter, reader].map((w) => w?.exit()));
  });

  it('does not hide a value set after it: a third process serves the set value from its L1', async () => {
    const key = freshId('deleted-ahead');
    await server.client().set(`${key}:version`, '1');
    await waitUntil('the reader holds the key in its L1', async () => {
      const r = await ask(reader, { cmd: 'read', key });
      return r.layer === 'l1' && r.version === 1;
    });
    await ask(ahead, { cmd: 'delete', key });
    await ask(setter, { cmd: 'set', key, version: 2 });
    // The set's announcement reaches the reader's L1, which keeps it: the value set after the
    // delete is newer than the delete on the one clock that orders them.
    const served = await waitUntil('the reader serves the set value from its L1', async () => {
      const r = await ask(reader, { cmd: 'read', key });
      expect(r.version).not.toBe(1);
      return r.layer === 'l1' && r.version === 2 ? r : undefined;
    }, DELIVERY_BOUND_MS);
    expect(served).toMatchObject({ status: 'hit', version: 2, layer: 'l1' });
    // And the process that deleted serves it too (its own delete does not hide it).
    expect(await ask(ahead, { cmd: 'read', key })).toMatchObject({ version: 2 });
  });
});
