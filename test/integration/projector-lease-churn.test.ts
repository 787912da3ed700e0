import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { leaseName } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { seededRng } from '../../bench/support/generate.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * Leases won and lost while the projector works: an intruder takes one projection's lease at a
 * time for a moment, over and over, while events of the same messages keep arriving. Each loss
 * and each win clears the runner's group cache from its lease timer, beside batches being read
 * and written for the other projections. However the two interleave, the tables end equal to a
 * clean replay.
 */
describe.each(DIALECTS)('projector under lease churn on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('ends equal to a replay', async () => {
    const random = seededRng(20_261_126);
    // 80 messages, their events arriving one at a time in shuffled order, a new message every
    // other round: most batches find some of their groups in the cache and read others' history.
    const pending = Array.from({ length: 80 }, (_, m) => sampleEvents(String(900 + m), 1_433_333_949 + m * 61).filter((e) => e['event'] !== 'campaign'));
    const projector = await startProjector(db, { leaseMs: 300, batchSize: 8, pollMs: 20 });
    let churning = true;
    let steals = 0;
    const churn = (async () => {
      while (churning) {
        const p = PROJECTIONS[Math.floor(random() * PROJECTIONS.length)];
        if (p === undefined) continue;
        const { numAffectedRows } = await sql`
          UPDATE leases SET owner = 'intruder', expires_at = now() + interval '150 milliseconds'
          WHERE name = ${leaseName(p.name)} AND owner <> 'intruder'`.execute(db.kysely);
        if (numAffectedRows === 1n) steals += 1;
        await new Promise((resolve) => setTimeout(resolve, 50 + random() * 150));
      }
    })();
    try {
      for (let round = 0; pending.some((events) => events.length > 0); round++) {
        const batch: Record<string, unknown>[] = [];
        for (const events of pending.slice(0, round / 2 + 1)) if (events.length > 0 && random() < 0.3) batch.push(...events.splice(Math.floor(random() * events.length), 1));
        if (batch.length > 0) await append(db, '1', batch);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    } finally {
      churning = false;
      await churn;
    }
    try {
      await caughtUp(db, undefined, 60_000);
    } finally {
      await projector.stop();
    }
    expect(steals).toBeGreaterThan(10);
    expect(projector.stats.cacheHits).toBeGreaterThan(0);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);
});
