import { configDefaults, defineConfig } from 'vitest/config';
import base from './vitest.config.js';
import { INTEGRATION_FILES } from './test/support/integration-files.js';

/** `npm run test:integration`: the tests that install or build something whole (see test/support/integration-files.ts). */
export default defineConfig({
  ...base,
  test: { ...base.test, include: INTEGRATION_FILES, exclude: configDefaults.exclude, typecheck: { enabled: false } },
});
