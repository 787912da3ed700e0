import { defineConfig } from 'vitest/config';

/**
 * The end-to-end fault test (test/faults/): the last part of `npm test` (20,000 events), or alone
 * with `npm run test:faults`. It owns its Postgres and NATS (started from the machine's
 * binaries), so it needs no global setup. FAULTS_EVENTS sets its size (default 200,000).
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 3_600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
    // CI's record of the run (.ci/run), beside the usual report.
    ...(process.env['FAULTS_RESULTS_JSON'] ? { reporters: ['default', 'json'], outputFile: { json: process.env['FAULTS_RESULTS_JSON'] } } : {}),
  },
});
