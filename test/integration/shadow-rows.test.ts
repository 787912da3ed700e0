import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TableSpec } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { openShadowRows } from '../../src/projector/shadow-rows.js';
import { createTableStatements, execAll } from '../../src/projector/tables.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';

/** A rebuild's row-table writes: every row arrives as it was given, and a failed write gives up cleanly. */
describe.each(DIALECTS)('shadow rows on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  const spec: TableSpec = {
    kind: 'rows',
    name: 'shadow_rows_probe',
    keys: [{ name: 'id', type: 'bigint' }],
    columns: [
      { name: 'label', type: 'text', nullable: true },
      { name: 'n', type: 'integer', nullable: true },
      { name: 'flag', type: 'boolean', nullable: true },
    ],
  };

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => {
    await cleanup();
  });
  beforeEach(async () => {
    await execAll(db.kysely, ['DROP TABLE IF EXISTS shadow_rows_probe__shadow', ...createTableStatements(spec, '__shadow')]);
  });

  const stored = async () =>
    (await sql<{ key: string; label: string | null; n: number | null; flag: boolean | null }>`SELECT id::text AS key, label, n, flag FROM shadow_rows_probe__shadow ORDER BY id`.execute(db.kysely)).rows;

  it('writes every row with its values as given (text escapes, nulls, numbers, booleans)', async () => {
    const rows = openShadowRows(db, '__shadow');
    const labels = ['plain', 'tab\there', 'line\nbreak', 'back\\slash', 'crème brûlée', '\\N', ''];
    try {
      for (let i = 0; i < 20_000; i++) rows.row(spec, [String(i + 1)], [labels[i % labels.length] ?? null, i % 5 === 0 ? null : -i, i % 3 === 0 ? null : i % 2 === 0]);
      await rows.room();
      await rows.finish();
    } finally {
      await rows.close();
    }
    expect(rows.rows).toBe(20_000);
    const got = await stored();
    expect(got).toHaveLength(20_000);
    for (const i of [0, 1, 2, 3, 4, 5, 6, 7, 19_999]) {
      expect(got[i]).toEqual({ key: String(i + 1), label: labels[i % labels.length], n: i % 5 === 0 ? null : -i, flag: i % 3 === 0 ? null : i % 2 === 0 });
    }
  });

  it('fails on a duplicate key, keeps nothing, and can be closed (the connection goes back to the pool)', async () => {
    const rows = openShadowRows(db, '__shadow');
    try {
      rows.row(spec, ['1'], ['a', 1, true]);
      rows.row(spec, ['1'], ['b', 2, false]);
      await expect(rows.finish()).rejects.toThrow(/duplicate key|unique/i);
    } finally {
      await rows.close();
    }
    expect(await stored()).toEqual([]);
    // The pool still serves queries (no connection left in a broken transaction).
    expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(db.kysely)).rows).toEqual([{ one: 1 }]);
  });
});
