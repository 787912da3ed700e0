import { defineConfig } from 'vitest/config';

/**
 * `npm run test:faults`: the end-to-end fault test (test/faults/), apart from `npm test`. It owns
 * its Postgres and NATS (started from the machine's binaries), so it needs no global setup.
 * FAULTS_EVENTS sets its size (default 200,000).
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 3_600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
