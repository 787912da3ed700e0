import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault test runs after this suite, on its own (vitest.faults.config.ts): `npm test` runs
    // both, `npm run test:faults` the fault test alone.
    exclude: [...configDefaults.exclude, 'test/faults/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: more parallel files only thrash Postgres and NATS.
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
    // CI's record of the run (.ci/run), beside the usual report.
    ...(process.env['TEST_RESULTS_JSON'] ? { reporters: ['default', 'json'], outputFile: { json: process.env['TEST_RESULTS_JSON'] } } : {}),
  },
});
