import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { append, caughtUp, compareRows, NO_DIFFERENCES, positionsInLog, startProjector, tenantRows, verifyAgainstReplay } from '../support/projections.js';
import { SCENARIOS } from '../unit/projections/scenarios/index.js';

/**
 * The read-model scenarios of test/unit/projections, end to end: each step's events appended to
 * the real log, the running projector catches up, and the tables hold exactly the expected rows
 * (later steps exercise retractions: a group's old contribution replaced by its new one).
 */
describe.each(DIALECTS)('read-model scenarios through the log and the projector on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let projector: Projector;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    projector = await startProjector(db, { leaseMs: 60_000 });
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  for (const scenario of SCENARIOS) {
    it(scenario.name, async () => {
      for (const [i, step] of scenario.steps.entries()) {
        await append(db, scenario.tenant, step.append);
        await caughtUp(db);
        const position = await positionsInLog(db, scenario.tenant);
        for (const then of step.then) {
          const { actual, expected } = compareRows(scenario.tenant, then, await tenantRows(db, then.table, scenario.tenant), position);
          expect(actual, `step ${i + 1}: ${then.table} ${JSON.stringify(then.where ?? {})}`).toEqual(expected);
        }
      }
    });
  }

  it('leaves tables equal to a clean replay of the whole log', async () => {
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});
