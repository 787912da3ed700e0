import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Page } from './conventions/paging.js';

/**
 * The one way a list is read: `SELECT … WHERE … ORDER BY … LIMIT/OFFSET` for the page, and the
 * count of all matches for `Total` — skipped when the page itself shows where the matches end.
 * `where` always starts with the tenant condition (see `tenant`).
 */
export interface ListSql {
  readonly from: RawBuilder<unknown>;
  readonly columns: RawBuilder<unknown>;
  readonly where: readonly RawBuilder<unknown>[];
  readonly orderBy: RawBuilder<unknown>;
  /**
   * The table's unique key (e.g. `t.api_key_id, t.id`). Given, a deep page (large Offset) picks
   * its keys first — an index-only walk past the skipped rows — and reads only the page's rows.
   */
  readonly key?: RawBuilder<unknown>;
}

/** From this Offset on, pages are read through their keys (see ListSql.key). */
export const DEEP_OFFSET = 500;

export async function readList<Row>(db: Kysely<Database>, q: ListSql, page: Page): Promise<{ rows: Row[]; total: number }> {
  const where = sql.join(q.where, sql` AND `);
  const count = async () => {
    const r = await sql<{ n: bigint | string }>`SELECT count(*) AS n FROM ${q.from} WHERE ${where}`.execute(db);
    return Number(r.rows[0]?.n ?? 0);
  };
  if (page.countOnly) return { rows: [], total: await count() };
  const pageSql =
    q.key !== undefined && page.offset >= DEEP_OFFSET
      ? sql<Row>`SELECT ${q.columns} FROM ${q.from} WHERE (${q.key}) IN (
          SELECT ${q.key} FROM ${q.from} WHERE ${where} ORDER BY ${q.orderBy} LIMIT ${page.limit} OFFSET ${page.offset}
        ) ORDER BY ${q.orderBy}`
      : sql<Row>`SELECT ${q.columns} FROM ${q.from} WHERE ${where} ORDER BY ${q.orderBy} LIMIT ${page.limit} OFFSET ${page.offset}`;
  const r = await pageSql.execute(db);
  const rows = r.rows;
  // A short, non-empty page (or an empty first page) ends the matches: no need to count.
  if (rows.length < page.limit && (rows.length > 0 || page.offset === 0)) return { rows, total: page.offset + rows.length };
  return { rows, total: await count() };
}

/** The tenant condition every read-model query starts with. */
export const tenant = (apiKeyId: string, column: RawBuilder<unknown> = sql.ref('api_key_id')): RawBuilder<unknown> =>
  sql`${column} = ${apiKeyId}::int8`;

/** Conditions for the optional filters that were given. */
export function conditions(pairs: readonly (readonly [unknown, () => RawBuilder<unknown>])[]): RawBuilder<unknown>[] {
  return pairs.filter(([value]) => value !== undefined).map(([, make]) => make());
}
