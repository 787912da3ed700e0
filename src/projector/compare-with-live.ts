import { sql } from 'kysely';
import type { TableSpec } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { allColumns, SHADOW } from './tables.js';

/** Rows only in the live table and only in the rebuilt one; where there are any, a few of each (`samples`). */
export interface TableDifference {
  onlyLive: number;
  onlyRebuilt: number;
  samples?: { live: Record<string, unknown>[]; rebuilt: Record<string, unknown>[] };
}

/** Rows of each side shown per differing table. */
const DIFFERENCE_SAMPLES = 5;

/** verify mode: each rebuilt table compared with its live one (EXCEPT ALL both ways), then dropped. */
export async function compareWithLive(db: Db, tables: readonly TableSpec[]): Promise<Record<string, TableDifference>> {
  const differences: Record<string, TableDifference> = {};
  for (const t of tables) {
    const shadow = t.name + SHADOW;
    // By the spec's columns, not `*`: a live table a migration added columns to has them in another order.
    const columns = allColumns(t).map((c) => c.name).join(', ');
    const only = (a: string, b: string) => `SELECT ${columns} FROM ${a} EXCEPT ALL SELECT ${columns} FROM ${b}`;
    const count = async (a: string, b: string) => {
      const { rows } = await sql<{ n: bigint }>`SELECT count(*) AS n FROM (${sql.raw(only(a, b))}) d`.execute(db.kysely);
      return Number(rows[0]?.n ?? 0);
    };
    const sample = async (a: string, b: string) => (await sql<Record<string, unknown>>`${sql.raw(only(a, b))} LIMIT ${DIFFERENCE_SAMPLES}`.execute(db.kysely)).rows;
    const d: TableDifference = { onlyLive: await count(t.name, shadow), onlyRebuilt: await count(shadow, t.name) };
    if (d.onlyLive + d.onlyRebuilt > 0) d.samples = { live: await sample(t.name, shadow), rebuilt: await sample(shadow, t.name) };
    differences[t.name] = d;
    await sql.raw(`DROP TABLE ${shadow}`).execute(db.kysely);
  }
  return differences;
}
