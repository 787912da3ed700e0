import { type Kysely, sql } from 'kysely';
import type { ColumnSpec, Projection, TableSpec } from '../../projections/kit/types.js';
import { inTransactionIfLocksCome, LOCK_WAIT_MS } from '../db/lock-timeout.js';
import type { Database } from '../db/schema.js';
import { SQL_COLUMN_TYPES } from './sql-types.js';

/**
 * DDL of the read-model tables, from the projection files' table specs. Live tables carry the
 * spec's name; a rebuild fills `<name>__shadow` and swaps it in.
 */

export const SHADOW = '__shadow';

export function allColumns(spec: TableSpec): ColumnSpec[] {
  return spec.kind === 'counters'
    ? [...spec.keys, ...spec.sums, ...(spec.maxes ?? []), ...(spec.mins ?? [])]
    : [...spec.keys, ...spec.columns];
}

/**
 * A counter table's rows from `source` (a relation with its columns, any number of rows per
 * key), as the fold's totals add them up: sums summed, maxes and mins as such, rows whose sums
 * are all zero left out.
 */
export function sumByKeySql(spec: Extract<TableSpec, { kind: 'counters' }>, source: string): string {
  const keys = spec.keys.map((c) => c.name);
  const folded = [
    ...keys,
    ...spec.sums.map((c) => `sum(${c.name})`),
    ...(spec.maxes ?? []).map((c) => `max(${c.name})`),
    ...(spec.mins ?? []).map((c) => `min(${c.name})`),
  ];
  const nonZero = spec.sums.map((c) => `sum(${c.name}) <> 0`).join(' OR ');
  return `SELECT ${folded.join(', ')} FROM ${source} GROUP BY ${keys.join(', ')} HAVING ${nonZero}`;
}

function columnDdl(c: ColumnSpec, isSum: boolean): string {
  return `${c.name} ${SQL_COLUMN_TYPES[c.type]}${c.nullable === true ? '' : ' NOT NULL'}${isSum ? ' DEFAULT 0' : ''}`;
}

function indexName(table: string, columns: readonly string[]): string {
  // An expression (`lower(email)`) is named by its words: `lower_email`.
  const words = columns.map((c) => c.replace(/\W+/g, '_').replace(/^_|_$/g, ''));
  const name = `${table}__${words.join('_')}_idx`;
  // Postgres cuts identifiers at 63 bytes, and the swap renames indexes by name.
  if (name.length > 63) throw new Error(`index name ${name} is longer than Postgres allows (63): shorten the table or column names`);
  return name;
}

/** The table with its primary key (unless `withKey` is false), and its other indexes unless `withIndexes` is false. */
export function createTableStatements(spec: TableSpec, suffix = '', withIndexes = true, withKey = true): string[] {
  const table = spec.name + suffix;
  const sums = new Set(spec.kind === 'counters' ? spec.sums.map((c) => c.name) : []);
  const columns = allColumns(spec).map((c) => columnDdl(c, sums.has(c.name)));
  const key = withKey ? `, CONSTRAINT ${table}_pkey PRIMARY KEY (${spec.keys.map((k) => k.name).join(', ')})` : '';
  const storage = spec.fillfactor !== undefined ? ` WITH (fillfactor = ${spec.fillfactor})` : '';
  const statements = [`CREATE TABLE IF NOT EXISTS ${table} (${columns.join(', ')}${key})${storage}`];
  if (withIndexes) statements.push(...createIndexStatements(spec, suffix));
  return statements;
}

export function createIndexStatements(spec: TableSpec, suffix = ''): string[] {
  const table = spec.name + suffix;
  return (spec.indexes ?? []).map((cols) => `CREATE INDEX IF NOT EXISTS ${indexName(table, cols)} ON ${table} (${cols.join(', ')})`);
}

/** Statements that replace the live table by its shadow (run inside one transaction). */
export function swapStatements(spec: TableSpec): string[] {
  const live = spec.name;
  const shadow = live + SHADOW;
  return [
    `DROP TABLE IF EXISTS ${live}`,
    `ALTER TABLE ${shadow} RENAME TO ${live}`,
    `ALTER TABLE ${live} RENAME CONSTRAINT ${shadow}_pkey TO ${live}_pkey`,
    ...(spec.indexes ?? []).map((cols) => `ALTER INDEX ${indexName(shadow, cols)} RENAME TO ${indexName(live, cols)}`),
  ];
}

export async function execAll(db: Kysely<Database>, statements: readonly string[]): Promise<void> {
  // One statement per call: PGlite runs parameterless SQL as a prepared statement.
  for (const s of statements) await sql.raw(s).execute(db);
}

/**
 * Creates every missing read-model table and records each projection's version the first
 * time. Returns the projections whose tables were built by another version of their code
 * (they need a rebuild).
 */
export async function ensureProjectionTables(db: Kysely<Database>, projections: readonly Projection[]): Promise<Projection[]> {
  const stale: Projection[] = [];
  const recorded = new Map((await db.selectFrom('projections').select(['name', 'version']).execute()).map((r) => [r.name, r.version]));
  for (const p of projections) {
    for (const t of p.tables) {
      await execAll(db, createTableStatements(t));
      await dropObsoleteIndexes(db, t);
    }
    const version = recorded.get(p.name);
    if (version === undefined) {
      await db.insertInto('projections').values({ name: p.name, version: p.version }).onConflict((oc) => oc.column('name').doNothing()).execute();
    } else if (version !== p.version) {
      stale.push(p);
    }
  }
  return stale;
}

/**
 * Drops the indexes of a live read-model table that its spec no longer names (an index this
 * code names `<table>__…_idx`, replaced by another in a later version): kept, each would cost
 * every write to the table and serve no query. Other indexes (an operator's own) are left. The
 * drop locks the table: it waits for that at most 2 s (reads would queue behind it), else the
 * next start tries again.
 */
async function dropObsoleteIndexes(db: Kysely<Database>, spec: TableSpec): Promise<void> {
  const wanted = new Set((spec.indexes ?? []).map((cols) => indexName(spec.name, cols)));
  const { rows } = await sql<{ name: string }>`
    SELECT indexname AS name FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename = ${spec.name} AND indexname LIKE ${`${spec.name}\\_\\_%\\_idx`}`.execute(db);
  for (const { name } of rows.filter((r) => !wanted.has(r.name))) {
    await inTransactionIfLocksCome(db, LOCK_WAIT_MS, async (trx) => {
      await sql.raw(`DROP INDEX IF EXISTS ${name}`).execute(trx);
    });
  }
}
