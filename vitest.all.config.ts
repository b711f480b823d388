import { configDefaults, defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * Every test file, the integration ones (test/support/integration-files.ts) included: for runs
 * that name their files from both sets (CI's focused runs on other clients and Node versions,
 * `npm run mutate`). `npm test` and `npm run test:integration` keep their own configs.
 */
export default defineConfig({
  ...base,
  test: { ...base.test, exclude: configDefaults.exclude, typecheck: { enabled: false } },
});
