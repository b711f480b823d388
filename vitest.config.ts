import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    pool: 'forks',
    // One file at a time: several suites start many processes, and two of them at once on a
    // 2-core machine starve each other's event loops.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    dangerouslyIgnoreUnhandledErrors: false,
    reporters: ['default'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
  },
});
