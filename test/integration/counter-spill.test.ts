import { sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigints, col } from '../../projections/kit/columns.js';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { Contribution } from '../../src/projector/contribution.js';
import { CounterSpill } from '../../src/projector/counter-spill.js';
import { createTableStatements, execAll, SHADOW } from '../../src/projector/tables.js';
import { openMigratedDb } from '../support/databases.js';

/** A projection with one counter table: two sums, a one-way max and min. */
const PROJECTION: Projection = {
  name: 'spill-test',
  version: 1,
  groups: ['message'],
  tables: [{ kind: 'counters', name: 'spill_test', keys: [col('k', 'text')], sums: bigints('a', 'b'), maxes: [col('hi', 'bigint', true)], mins: [col('lo', 'bigint', true)] }],
  project: () => {},
};
const [SPEC] = PROJECTION.tables;

describe('counter totals spilled to Postgres', () => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('postgres'));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('loads what an unspilled total would: sums added, one-way columns kept from every part, all-zero rows left out', async () => {
    if (SPEC?.kind !== 'counters') throw new Error('counter spec expected');
    await execAll(db.kysely, [`DROP TABLE IF EXISTS spill_test${SHADOW}`, ...createTableStatements(SPEC, SHADOW, false, false)]);
    const total = new Contribution(PROJECTION);
    const spill = new CounterSpill(db.pool as pg.Pool, 2);

    // Part 1, spilled: x's max (9) and min (1) come with sums of zero.
    total.add('spill_test', ['x'], [0, 0], [9], [1]);
    total.add('spill_test', ['y'], [1, 2], [4], [4]);
    total.add('spill_test', ['z'], [0, 0], [null], [null]);
    expect(spill.full([total])).toBe(true);
    await spill.spill([total]);
    expect(total.counters.get('spill_test')?.size).toBe(0);
    // Part 2, still in memory when loaded.
    total.add('spill_test', ['x'], [1, 0], [3], [2]);
    total.add('spill_test', ['y'], [2, 3], [null], [7]);
    total.add('spill_test', ['w'], [5, 0], [null], [null]);
    expect(spill.spilled(SPEC)).toBe(3);

    const loaded = await spill.load(SPEC, `spill_test${SHADOW}`, total.counters.get('spill_test')?.values() ?? []);
    expect(loaded).toBe(3);
    const { rows } = await sql<{ k: string; a: string; b: string; hi: string | null; lo: string | null }>`
      SELECT k, a::text, b::text, hi::text, lo::text FROM spill_test__shadow ORDER BY k`.execute(db.kysely);
    expect(rows).toEqual([
      { k: 'w', a: '5', b: '0', hi: null, lo: null },
      { k: 'x', a: '1', b: '0', hi: '9', lo: '1' },
      { k: 'y', a: '3', b: '5', hi: '4', lo: '4' },
    ]);
    // The spill is gone once loaded; nothing is left to drop.
    const left = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'spill_test__spill'`.execute(db.kysely);
    expect(left.rows[0]?.n).toBe(0);
    await spill.drop();
  });

  it('refuses to spill a table whose one-way columns SQL would order differently from the fold', async () => {
    const textMax: Projection = { ...PROJECTION, tables: [{ kind: 'counters', name: 'spill_text', keys: [col('k', 'text')], sums: bigints('a'), maxes: [col('label', 'text', true)] }] };
    const total = new Contribution(textMax);
    total.add('spill_text', ['x'], [1], ['b']);
    await expect(new CounterSpill(db.pool as pg.Pool, 0).spill([total])).rejects.toThrow(/spill_text: one-way column label is text/);
  });

  it('drops its spills when the rebuild gives up before loading them', async () => {
    if (SPEC?.kind !== 'counters') throw new Error('counter spec expected');
    const total = new Contribution(PROJECTION);
    const spill = new CounterSpill(db.pool as pg.Pool, 0);
    total.add('spill_test', ['x'], [1, 0], [1], [1]);
    await spill.spill([total]);
    const count = async () => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'spill_test__spill'`.execute(db.kysely)).rows[0]?.n;
    expect(await count()).toBe(1);
    await spill.drop();
    expect(await count()).toBe(0);
    expect(spill.spilled(SPEC)).toBe(0);
  });
});
