// `node --import <this file>`: registers built-sources-hooks.mjs for the builds listed in
// DOGPILE_BENCH_BUILDS (set by built-sources.ts in the process that starts this one).
import { register } from 'node:module';

const pairs = JSON.parse(process.env.DOGPILE_BENCH_BUILDS ?? '[]');
if (pairs.length > 0) register('./built-sources-hooks.mjs', import.meta.url, { data: pairs });
