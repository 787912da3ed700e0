import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { type Completed, runCli, stopAll } from '../support/processes.js';
import { createTestDatabase } from '../support/services.js';

/**
 * Processes starting together on a fresh database (a deployment's first start, `migrate` run by
 * several replicas) set the schema up one after the other: none fails on another's
 * `CREATE TABLE IF NOT EXISTS`.
 */

const drops: (() => Promise<void>)[] = [];
beforeEach(stopAll);
afterAll(async () => {
  await stopAll();
  for (const drop of drops) await drop();
});

describe('schema setup from several processes at once', () => {
  it('every concurrent `migrate` on a fresh database succeeds', async () => {
    // A few rounds: each is a fresh database, where the race is.
    for (let round = 0; round < 2; round++) {
      const database = await createTestDatabase();
      drops.push(database.drop);
      const runs: Completed[] = await Promise.all(Array.from({ length: 4 }, () => runCli(['migrate'], { env: { DATABASE_URL: database.url } })));
      for (const r of runs) expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      // One of them applied the migrations; each found the read-model tables there or made them.
      expect(runs.filter((r) => r.stdout.includes('applied: 0001-event-log'))).toHaveLength(1);
    }
  }, 180_000);
});
