/**
 * The tests that install or build something whole before they run (the packed tarball in fresh
 * projects, the README's quick starts, a `next build`, an app on Next 15 from the registry, a Nest
 * 11 app, the examples on Bun, Deno and another Node), and the longest whole-system runs (every
 * Redis topology, the fleets of processes of every suite, the fault campaign's histories, the
 * differential HTTP campaign's live run, the memory bounds, the API report made from a fresh
 * build):
 * `npm run test:integration` runs them, `npm test` runs the rest, in under 15 minutes. CI runs
 * both, and some of them again on every other client (vitest.all.config.ts).
 */
export const INTEGRATION_FILES = [
  'test/quickstarts.test.ts',
  'test/package.test.ts',
  'test/package-install.test.ts',
  'test/nextjs-example.test.ts',
  'test/next15.test.ts',
  'test/nest11.test.ts',
  'test/examples.test.ts',
  'test/examples-web.test.ts',
  'test/runtimes.test.ts',
  'test/demo.test.ts',
  'test/topologies.test.ts',
  'test/stale-processes.test.ts',
  'test/cache-processes.test.ts',
  'test/lock-processes.test.ts',
  'test/coherence-processes.test.ts',
  'test/stale-http.test.ts',
  'test/chaos.test.ts',
  'test/key-memory.test.ts',
  'test/nest-processes.test.ts',
  'test/nest-cache-manager-processes.test.ts',
  'test/http-processes.test.ts',
  'test/http-refresh-processes.test.ts',
  'test/web-processes.test.ts',
  'test/fleet-harness.test.ts',
  'test/http-campaign.test.ts',
  'test/api-report.test.ts',
];
