import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { readCheckpoint } from '../../src/log/checkpoints.js';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { capturingLogger } from '../support/harness.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * The live projector's writes commit without waiting for the disk, so a database crash can
 * take back its last batches: their rows and their checkpoint moves, together. Here the
 * database is put back to how it was a few batches earlier under a running projector (as a
 * crash and recovery would leave it), with no new event to come: the projector must notice
 * on its own and fold those batches again, ending equal to a clean replay.
 */
const TABLES = PROJECTIONS.flatMap((p) => p.tables.map((t) => t.name));
const NAMES = PROJECTIONS.map((p) => p.name);

async function messages(db: Db, from: number, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await append(db, '7', sampleEvents(String(from + i), 1_433_333_949 + (from + i) * 61));
}

describe.each(DIALECTS)('projector after lost commits on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let projector: Projector;
  const logged = capturingLogger();

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    projector = await startProjector(db, { leaseMs: 60_000, pollMs: 50, batchSize: 7 }, PROJECTIONS, logged.log);
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  it('folds again the batches a crash took back, with no new event to trigger it', async () => {
    await messages(db, 50_000, 6);
    await caughtUp(db);
    // What a crash would have kept: every read model and checkpoint as of now.
    for (const t of TABLES) await sql`CREATE TABLE ${sql.id(`kept_${t}`)} AS SELECT * FROM ${sql.id(t)}`.execute(db.kysely);
    await sql`CREATE TABLE kept_checkpoints AS SELECT * FROM checkpoints WHERE name IN (${sql.join(NAMES)})`.execute(db.kysely);
    const kept = await readCheckpoint(db.kysely, NAMES[0] as string);

    // More batches, some touching the same messages again (an open after the first ones).
    await messages(db, 50_100, 6);
    await append(db, '7', [{ ...sampleEvents('50000').find((e) => e['event'] === 'open'), time: 1_433_339_999, EventID: 'late-open-50000' }]);
    await caughtUp(db);
    expect(await readCheckpoint(db.kysely, NAMES[0] as string)).toBeGreaterThan(kept);

    // The crash: those batches' rows and checkpoint moves are gone.
    await db.kysely.transaction().execute(async (trx) => {
      for (const t of TABLES) {
        await sql`DELETE FROM ${sql.id(t)}`.execute(trx);
        await sql`INSERT INTO ${sql.id(t)} SELECT * FROM ${sql.id(`kept_${t}`)}`.execute(trx);
      }
      await sql`UPDATE checkpoints c SET position = k.position FROM kept_checkpoints k WHERE c.name = k.name`.execute(trx);
    });

    await caughtUp(db, PROJECTIONS, 10_000);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
    // Said as a possible crash, not as a replay's rebuild (the build times did not change).
    const lines = logged.lines();
    expect(lines.filter((l) => l['level'] === 40 && String(l['msg']).includes('a database crash took back'))).not.toEqual([]);
    expect(lines.filter((l) => String(l['msg']).includes('rebuilt by a replay'))).toEqual([]);
  });
});
