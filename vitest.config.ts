import { configDefaults, defineConfig } from 'vitest/config';
import { INTEGRATION_FILES } from './test/support/integration-files.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Those run by `npm run test:integration` (vitest.integration.config.ts).
    exclude: [...configDefaults.exclude, ...INTEGRATION_FILES],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    pool: 'forks',
    // One file at a time: several suites start many processes, and two of them at once on a
    // 2-core machine starve each other's event loops.
    fileParallelism: false,
    // On CI a failed test runs once more (vitest reports it as retried): the multi-process,
    // cluster and failover suites share 2 cores with everything else, and one stalled event
    // loop must not hide the rest of the run. Locally every failure counts at once.
    retry: process.env.CI ? 1 : 0,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    dangerouslyIgnoreUnhandledErrors: false,
    reporters: ['default'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
  },
});
