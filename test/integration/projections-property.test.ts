import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { appendEvents } from '../../src/log/append.js';
import { logHead } from '../../src/log/read.js';
import { DIALECTS, readModelDb } from '../support/databases.js';
import { caughtUp, logRows, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';
import { batchesOf, eventSetArb } from '../unit/projections/arbitraries.js';

/**
 * The read models are a pure function of the set of events in the log (projections/README.md,
 * the numbers): a random event set appended in random batches, projected with a random batch
 * size by a projector that is stopped at a random point while appends go on and replaced by
 * another one, ends equal to one clean replay of the log (EXCEPT ALL both ways, per table). Each
 * projector keeps a group cache of a random size (none, a few groups so that groups drop out and
 * are read again, or all).
 */

/**
 * The log is append-only (no reset between runs): each run gets tenants of its own, and the
 * comparison covers the whole log. A failed run leaves its tables wrong, so shrinking would only
 * find "anything fails": the first counterexample is reported as it is.
 */
let run = 0;
const tenantsOfRun = (): string[] => {
  run += 1;
  return [0, 1, 2].map((i) => String(1000 + run * 3 + i));
};

describe.each(DIALECTS)('read models equal a replay whatever the batches and restarts, on %s', (dialect) => {
  const dbOf = readModelDb(dialect);

  it('random events, random batch cuts, projector stopped and replaced at a random point', async () => {
    const db = dbOf();
    await fc.assert(
      fc.asyncProperty(
        eventSetArb,
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.nat(10),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 500 }),
        fc.constantFrom(0, 1, 3, 50_000),
        async (events, cuts, crashAt, firstBatchSize, secondBatchSize, cacheGroups) => {
          const tenants = tenantsOfRun();
          const batches = batchesOf(events, cuts).map((b) => b.flatMap((e) => logRows(tenants[e.tenant] as string, [e.event])));
          const stopAt = crashAt % (batches.length + 1);
          const first = await startProjector(db, { batchSize: firstBatchSize, cacheGroups });
          for (const batch of batches.slice(0, stopAt)) await appendEvents(db.kysely, batch);
          // Stopped while it may still be behind; the rest is appended with no projector running.
          await first.stop();
          for (const batch of batches.slice(stopAt)) await appendEvents(db.kysely, batch);
          const second = await startProjector(db, { batchSize: secondBatchSize, cacheGroups });
          try {
            await caughtUp(db);
          } finally {
            await second.stop();
          }
          const checkpoints = await db.kysely.selectFrom('checkpoints').select(['name', 'position']).execute();
          const head = await logHead(db.kysely);
          expect(checkpoints.filter((c) => c.position !== head)).toEqual([]);
          expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
        },
      ),
      { numRuns: 25, endOnFailure: true },
    );
  }, 300_000);
});
