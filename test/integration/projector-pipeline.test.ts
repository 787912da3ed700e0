import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * The live projector folds the next batch while the one before is being written (see
 * `runner.ts`). A write that fails meanwhile must drop the batch folded after it and the group
 * states it left in the cache: the tables end as a clean replay makes them, nothing lost and
 * nothing counted twice.
 */
describe.each(DIALECTS)('pipelined projector on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    // Every write moves the checkpoints in the same statement: the trigger fails the statement
    // that makes the 40th checkpoint update (the 4th batch of 12 projections), once.
    await sql.raw('CREATE SEQUENCE checkpoint_updates').execute(db.kysely);
    await sql
      .raw(
        `CREATE FUNCTION fail_one_checkpoint_update() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF nextval('checkpoint_updates') = 40 THEN RAISE EXCEPTION 'injected write failure'; END IF;
           RETURN NEW;
         END $$`,
      )
      .execute(db.kysely);
    await sql.raw('CREATE TRIGGER fail_one BEFORE UPDATE ON checkpoints FOR EACH ROW EXECUTE FUNCTION fail_one_checkpoint_update()').execute(db.kysely);
  });
  afterAll(async () => {
    await cleanup();
  });

  it('drops the batch folded during a write that fails, and ends equal to a replay', async () => {
    // 40 messages of 10 events each, in small batches: many batches folded while another is written.
    for (let m = 0; m < 40; m++) await append(db, String(1 + (m % 3)), sampleEvents(String(500 + m), 1_433_333_949 + m * 97));
    const projector = await startProjector(db, { batchSize: 25 });
    try {
      await caughtUp(db, undefined, 60_000);
      expect(projector.stats.errors).toBe(1);
    } finally {
      await projector.stop();
    }
    const { rows } = await sql<{ n: string }>`SELECT last_value::text AS n FROM checkpoint_updates`.execute(db.kysely);
    expect(Number(rows[0]?.n)).toBeGreaterThan(40);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 90_000);
});
