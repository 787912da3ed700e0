import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { replay } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

const TABLES = PROJECTIONS.flatMap((p) => p.tables.map((t) => t.name));

/** Every index of the read-model tables (the primary keys' included), as Postgres defines it. */
async function indexDefinitions(db: Db): Promise<string[]> {
  const { rows } = await sql<{ def: string }>`
    SELECT indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ANY(${TABLES}) ORDER BY indexname`.execute(db.kysely);
  return rows.map((r) => r.def);
}

/** The read-model tables' storage options (`fillfactor`), by table. */
async function storageOptions(db: Db): Promise<string[]> {
  const { rows } = await sql<{ t: string }>`
    SELECT relname || ' ' || coalesce(array_to_string(reloptions, ','), '-') AS t FROM pg_class WHERE relkind = 'r' AND relname = ANY(${TABLES}) ORDER BY relname`.execute(db.kysely);
  return rows.map((r) => r.t);
}

async function primaryKeys(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT conname AS name FROM pg_constraint WHERE contype = 'p' AND conrelid::regclass::text = ANY(${TABLES}) ORDER BY conname`.execute(db.kysely);
  return rows.map((r) => r.name);
}

async function rowCount(db: Db): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT (${sql.raw(TABLES.map((t) => `(SELECT count(*) FROM ${t})`).join(' + '))})::int AS n`.execute(db.kysely);
  return rows[0]?.n ?? -1;
}

describe.each(DIALECTS)('replay on %s', (dialect) => {
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

  // A rebuild folds the log one partition of groups at a time; the partition count must not matter.
  it.each([1, 7, 40])('gives the live tables with partitions of %i events', async (partitionEvents) => {
    const report = await replay(db, PROJECTIONS, { readBatch: 13, catchUpBatch: 100, mode: 'verify', partitionEvents });
    const nonEmpty = Object.entries(report.differences ?? {}).filter(([, d]) => d.onlyLive !== 0 || d.onlyRebuilt !== 0);
    expect(nonEmpty).toEqual([]);
    expect(report.rows).toBeGreaterThan(100);
  });

  // A rebuild builds its tables' keys and indexes its own way (on Postgres: row tables indexed
  // while they load, counter tables keyed and indexed after): what it swaps in must be what the
  // live projector created, and the projector must go on writing into it.
  it('swaps in tables with the live ones’ primary keys, indexes and storage options, which take the projector’s next writes', async () => {
    const indexes = await indexDefinitions(db);
    const keys = await primaryKeys(db);
    const storage = await storageOptions(db);
    expect(storage).toContain('messages fillfactor=80');
    expect(keys).toHaveLength(TABLES.length);

    const report = await replay(db, PROJECTIONS, { readBatch: 50, catchUpBatch: 100 });
    expect(await indexDefinitions(db)).toEqual(indexes);
    expect(await primaryKeys(db)).toEqual(keys);
    expect(await storageOptions(db)).toEqual(storage);
    // Nothing came meanwhile: the rows it reports are the rows the tables hold.
    expect(report.rows).toBe(await rowCount(db));

    // New events (later times: new EventIDs) for the same messages upsert into the swapped-in rows (ON CONFLICT needs the keys).
    const before = await rowCount(db);
    for (let m = 0; m < 20; m++) {
      const events = sampleEvents(String(5000 + m), 1_433_340_000 + m * 977).map((e) => ({ ...e, mj_campaign_id: 7000 + (m % 3) }));
      await append(db, String(1 + (m % 2)), events);
    }
    await caughtUp(db);
    expect(await rowCount(db)).toBeGreaterThan(before);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});
