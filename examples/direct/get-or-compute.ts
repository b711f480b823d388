/**
 * Direct calls: `getOrCompute` and `cacheWithoutDogpiling` in a plain script.
 *
 *   node --import tsx examples/direct/get-or-compute.ts
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx examples/direct/get-or-compute.ts
 */
import { Redis } from 'ioredis';
import { cacheWithoutDogpiling, createCache, getDefaultCache, getOrCompute, setDefaultCache } from 'dogpile-guard';

// The top-level functions use a default cache: in this process until it is replaced. With
// REDIS_URL, replace it with one on Redis, shared by every process that uses that Redis.
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
if (redis) setDefaultCache(createCache({ redis }));
const cache = getDefaultCache();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const times = (n: number) => (n === 1 ? 'once' : `${n} times`);

// A slow upstream call, counted.
let upstreamCalls = 0;
async function fetchExchangeRates() {
  upstreamCalls++;
  await sleep(200);
  return { base: 'EUR', USD: 1.08, GBP: 0.85, JPY: 162.4, fetchedAt: new Date().toISOString() };
}

// Start cold, so a second run of this script shows the same thing.
await cache.delete('rates:EUR');
await cache.delete('page:home');
await cache.delete('flaky');

// 1. A herd: 100 concurrent calls for one missing key. The loader runs once; everybody gets its value.
const rates = await Promise.all(Array.from({ length: 100 }, () => getOrCompute('rates:EUR', fetchExchangeRates, '1m')));
console.log(`100 concurrent getOrCompute('rates:EUR') calls: the loader ran ${times(upstreamCalls)}, all got USD=${rates[99]!.USD}`);

// 2. Now it is cached: no loader run until the TTL (1 minute) runs out.
await getOrCompute('rates:EUR', fetchExchangeRates, '1m');
console.log(`one more call: the loader has still run ${times(upstreamCalls)} (a hit)`);

// 3. cacheWithoutDogpiling(key, loader, ttl, options): the same, with the TTL as its own argument.
//    Here a waiter that waits longer than 2 s runs the loader itself instead of failing.
let renders = 0;
const renderHome = async () => {
  renders++;
  await sleep(100);
  return `<h1>Home</h1><p>rendered at ${new Date().toISOString()}</p>`;
};
const pages = await Promise.all(
  Array.from({ length: 20 }, () => cacheWithoutDogpiling('page:home', renderHome, '30s', { waitTimeout: '2s', onWaitTimeout: 'load' })),
);
console.log(`20 concurrent cacheWithoutDogpiling('page:home') calls: rendered ${times(renders)}, ${pages[0]!.length} characters`);

// 4. How was a call answered? resolve() says: 'hit' | 'miss' | 'coalesced' | 'pass'.
const { status, createdAt } = await cache.resolve('rates:EUR', fetchExchangeRates, '1m');
console.log(`cache.resolve('rates:EUR'): ${status}, computed ${Math.round(cache.now() - createdAt)} ms ago`);

// 5. A failing loader: every concurrent caller gets the error, and it is not cached.
let attempts = 0;
const flaky = async (): Promise<string> => {
  attempts++;
  await sleep(50);
  throw new Error('upstream is down');
};
const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => getOrCompute('flaky', flaky, '1m')));
const failed = outcomes.filter((o) => o.status === 'rejected').length;
console.log(`10 concurrent calls to a failing loader: ${failed} failed with "upstream is down", the loader ran ${times(attempts)} (errors are shared, never cached)`);

await cache.close();
await redis?.quit(); // the cache never closes a client it was given
