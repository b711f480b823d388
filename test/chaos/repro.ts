/**
 * Minimal reproductions of violations the campaign found, one scenario each, outside the
 * suite (they fail until the library is fixed):
 *
 *   node --import tsx test/chaos/repro.ts lost-set      # a set resolved while a loader ran is overwritten by the loader's older value
 *   node --import tsx test/chaos/repro.ts lost-delete   # likewise for a delete
 *   node --import tsx test/chaos/repro.ts invalidate    # the same race with invalidateTags (holds: for comparison)
 *   node --import tsx test/chaos/repro.ts refresher     # a process refreshing a stale value keeps answering it after another process's set
 *
 * Exit code 1 (and "VIOLATION") when the scenario reproduces, 0 when the promise held.
 */
import { Redis } from 'ioredis';
import { createCache } from '../../src/index.js';
import { startRedis } from '../../tools/redis-server.js';
import { sleep } from '../../tools/basics.js';

const scenario = process.argv[2];
if (scenario !== 'lost-set' && scenario !== 'lost-delete' && scenario !== 'invalidate' && scenario !== 'refresher') {
  console.error('usage: repro.ts lost-set | lost-delete | invalidate | refresher');
  process.exit(2);
}
const server = await startRedis();
if (scenario === 'refresher') await refresher();
const leader = createCache({ redis: new Redis(server.url) });
const writer = createCache({ redis: new Redis(server.url) });
let finishLoader: () => void = () => {};
const loaderMayFinish = new Promise<void>((resolve) => (finishLoader = resolve));
let loaderStarted: () => void = () => {};
const started = new Promise<void>((resolve) => (loaderStarted = resolve));

// A loader reads the database (version 1), then takes a while to return.
const reading = leader.getOrCompute(
  'k',
  async () => {
    loaderStarted();
    await loaderMayFinish;
    return 'version 1';
  },
  { ttl: 60_000, tags: ['t'] },
);
await started;
// Meanwhile the data changes and the writer tells the cache, which resolves.
if (scenario === 'lost-set') await writer.set('k', 'version 2', 60_000);
else if (scenario === 'lost-delete') await writer.delete('k');
else await writer.invalidateTags(['t']);
finishLoader();
await reading;
await sleep(200); // well past one pub/sub delivery
const seen = await writer.get('k');
const expected = scenario === 'lost-set' ? 'version 2' : undefined;
console.log(`${scenario}: after the write resolved and the loader returned, get() = ${JSON.stringify(seen)} (expected ${JSON.stringify(expected)})`);
await leader.close();
await writer.close();
await server.stop();
if (seen !== expected) console.log('VIOLATION');
process.exit(seen === expected ? 0 : 1);

/** A stale value being refreshed (slowly) in process A; process B sets a new value; A is asked again. */
async function refresher(): Promise<never> {
  const a = createCache({ redis: new Redis(server.url), staleWhileRevalidate: 60_000 });
  const b = createCache({ redis: new Redis(server.url), staleWhileRevalidate: 60_000 });
  await a.getOrCompute('k', () => 'version 1', 100);
  await sleep(150); // version 1 is stale now
  let finish: () => void = () => {};
  const slow = () => new Promise<string>((resolve) => (finish = () => resolve('version 3 (the refresh)')));
  const first = await a.resolve('k', slow, 100); // stale answer; A refreshes in the background
  await b.set('k', 'version 2', 60_000);
  await sleep(200); // well past one pub/sub delivery
  const second = await a.resolve('k', slow, 100);
  finish();
  console.log(`refresher: first ${first.status} ${JSON.stringify(first.value)}; after B's set resolved, A answers ${second.status} ${JSON.stringify(second.value)} (expected "version 2")`);
  await sleep(50);
  await a.close();
  await b.close();
  await server.stop();
  if (second.value !== 'version 2') console.log('VIOLATION');
  process.exit(second.value === 'version 2' ? 0 : 1);
}
