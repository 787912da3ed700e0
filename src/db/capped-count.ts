import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.js';

/**
 * A table's rows counted exactly up to `exactUpTo` (a scan of at most that many rows), past it
 * the planner's estimate of the table's rows, never less than the part counted: the count stays
 * cheap however many rows pile up (a full `count(*)` of millions takes most of a second, and
 * /status and /metrics, which show such counts, take no credentials).
 */
export async function cappedCount(db: Kysely<Database>, table: keyof Database & string, exactUpTo: number): Promise<{ count: number; exact: boolean }> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM (SELECT 1 FROM ${sql.table(table)} LIMIT ${exactUpTo + 1}) AS d`.execute(db);
  const n = Number(rows[0]?.n ?? 0);
  if (n <= exactUpTo) return { count: n, exact: true };
  const estimate = await sql<{ n: string }>`SELECT reltuples::int8 AS n FROM pg_class WHERE oid = ${table}::regclass`.execute(db);
  return { count: Math.max(n, Number(estimate.rows[0]?.n ?? 0)), exact: false };
}
