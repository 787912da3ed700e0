import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: more parallel files only thrash Postgres and NATS.
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
  },
});
