import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Projector } from '../../src/projector/runner.js';
import { replay } from '../../src/projector/replay.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, startProjector, tableRows } from '../support/projections.js';
import type { Db } from '../../src/db/connect.js';

describe.each(DIALECTS)('projector on %s', (dialect) => {
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

  it('keeps every read model up to date and equal to a replay', async () => {
    await append(db, '1', sampleEvents('100'));
    await append(db, '1', sampleEvents('101', 1_433_340_000));
    await append(db, '2', sampleEvents('100'));
    await caughtUp(db);
    const lifetime = (await tableRows(db, 'statcounters')).filter((r) => r['timing'] === 'L' && r['source_type'] === 'A');
    expect(lifetime).toHaveLength(2);
    const report = await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000, mode: 'verify' });
    for (const [table, d] of Object.entries(report.differences ?? {})) expect({ table, ...d }).toEqual({ table, onlyLive: 0, onlyRebuilt: 0 });
  });
});
