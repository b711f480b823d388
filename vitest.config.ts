import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    dangerouslyIgnoreUnhandledErrors: false,
    reporters: ['default'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
  },
});
