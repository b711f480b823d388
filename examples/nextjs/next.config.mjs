import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// The example imports 'dogpile-guard' from this repository's build (`npm run build`; see
// tsconfig.json paths), as an app imports the installed package: the repository root is the
// project's root for the bundler and the output tracing (EXAMPLE_WORKSPACE_ROOT: a directory
// above it, when node_modules is a link to outside the repository).
const root = path.resolve(here, '../..');
const workspace = process.env.EXAMPLE_WORKSPACE_ROOT ?? root;

// Next's page, route and data caches, and 'use cache', shared by every process on REDIS_URL.
// Next does not resolve these paths: they are absolute. Read when the server starts, to compare:
// NEXT_OWN_CACHE=1 leaves Next's own per-process caches in place; NEXT_OTHER_CACHE_HANDLER (an
// absolute path) is another package's cacheHandler alone, as its own setup names it (Next's own
// 'use cache' handler and memory size left as they are).
const shared = {
  cacheHandler: path.join(here, 'cache-handler.mjs'),
  cacheHandlers: { default: path.join(here, 'use-cache-handler.mjs'), remote: path.join(here, 'use-cache-handler.mjs') },
  // No per-process copy in front of the shared cache.
  cacheMaxMemorySize: 0,
};

/** @type {import('next').NextConfig} */
export default {
  turbopack: { root: workspace },
  outputFileTracingRoot: workspace,
  ...(process.env.NEXT_OWN_CACHE === '1' ? {} : process.env.NEXT_OTHER_CACHE_HANDLER ? { cacheHandler: process.env.NEXT_OTHER_CACHE_HANDLER } : shared),
  // 'use cache' beside route segment config (`export const revalidate`).
  experimental: { useCache: true },
};
