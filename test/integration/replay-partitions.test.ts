import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { replay } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, startProjector } from '../support/projections.js';

/** A rebuild folds the log one partition of groups at a time; the partition count must not matter. */
describe.each(DIALECTS)('replay in partitions on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let projector: Projector;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    projector = await startProjector(db);
    for (let m = 0; m < 20; m++) {
      const events = sampleEvents(String(5000 + m), 1_433_333_949 + m * 977).map((e) => ({ ...e, mj_campaign_id: 7000 + (m % 3), mj_list_id: m % 2 }));
      await append(db, String(1 + (m % 2)), events);
    }
    await caughtUp(db);
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  it.each([1, 7, 40])('gives the live tables with partitions of %i events', async (partitionEvents) => {
    const report = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', partitionEvents });
    const nonEmpty = Object.entries(report.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0);
    expect(nonEmpty).toEqual([]);
    expect(report.rows).toBeGreaterThan(100);
  });
});
