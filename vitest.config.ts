import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One Postgres cluster for the run; each file makes its own databases on it.
    globalSetup: ['test/setup/global.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // e2e suites spawn real MCP servers; two cores, so keep parallelism modest.
    maxWorkers: 2,
    pool: 'forks',
    // The JSON report lets .ci/run print one plain "N passed, N failed" closing line.
    reporters: ['default', ['json', { outputFile: '.manifold/test-results.json' }]],
  },
});
