import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropFloorTables, FLOOR_SUFFIX, writeFloor } from '../../bench/replay/write-floor.js';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, startProjector } from '../support/projections.js';

/**
 * The replay bench's write floor copies every read model, whole, into bare tables that get the
 * live tables' keys and indexes, and leaves nothing behind: its figure is worth something only
 * if it writes what a rebuild writes.
 */
describe('the replay bench write floor', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  const tables = PROJECTIONS.flatMap((p) => p.tables.map((t) => t.name));

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
    await append(db, '1', sampleEvents());
    const projector = await startProjector(db);
    await caughtUp(db);
    await projector.stop();
  });
  afterAll(async () => {
    await cleanup();
  });

  it('copies every read-model row and builds each table key and index, then drops its copies', async () => {
    // Each table's index definitions: the base table's name and what is indexed, how.
    const indexDefs = async (suffix: string) => {
      const { rows } = await sql<{ tablename: string; indexdef: string }>`
        SELECT tablename, indexdef FROM pg_indexes WHERE tablename IN (${sql.join(tables.map((t) => t + suffix))})`.execute(db.kysely);
      return rows.map((r) => `${r.tablename.slice(0, r.tablename.length - suffix.length)}: ${r.indexdef.replace(/^.* ON \S+ /, '')}`).sort();
    };
    const live = await sql<{ n: string }>`
      SELECT (${sql.join(
        tables.map((t) => sql`(SELECT count(*) FROM ${sql.table(t)})`),
        sql` + `,
      )})::text AS n`.execute(db.kysely);
    const liveRows = Number(live.rows[0]?.n);
    expect(liveRows).toBeGreaterThan(20);

    const floor = await writeFloor(db, true);
    try {
      expect(floor.rows).toBe(liveRows);
      expect(floor.ms).toBeGreaterThan(0);
      // The same keys and indexes as the live tables, on the same columns.
      expect(await indexDefs('__floor')).toEqual(await indexDefs(''));
    } finally {
      await dropFloorTables(db);
    }
    const left = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE ${`%${FLOOR_SUFFIX}%`}`.execute(db.kysely);
    expect(left.rows[0]?.n).toBe(0);
  });
});
