import { cacheLife, cacheTag } from 'next/cache';
import { countRender, readVersion } from './renders';

// A 'use cache' function: run about once a second for the whole fleet, whatever the number of
// processes and requests.
export async function prices() {
  'use cache';
  cacheLife({ stale: 1, revalidate: 1, expire: 60 });
  const run = await countRender('prices');
  return { run, at: new Date().toISOString(), pid: process.pid, rates: new Map([['EUR', 1], ['USD', 1.08]]) };
}

// Cached until its tag is revalidated (`revalidateTag('catalog', ...)` or `updateTag('catalog')`).
export async function catalog() {
  'use cache';
  cacheLife('days');
  cacheTag('catalog');
  return { version: await readVersion('catalog'), run: await countRender('catalog') };
}
