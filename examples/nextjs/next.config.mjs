import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The example imports 'dogpile-guard' from this repository's build (`npm run build`; see
// tsconfig.json paths), as an app imports the installed package: the repository root is the
// project's root for the bundler and the output tracing.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** @type {import('next').NextConfig} */
export default {
  turbopack: { root },
  outputFileTracingRoot: root,
};
