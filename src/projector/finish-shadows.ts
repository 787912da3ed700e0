import { sql } from 'kysely';
import type { TableSpec } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { hasSums, loadCounters } from './bulk-load.js';
import type { Contribution, CounterEntry } from './contribution.js';
import type { ReplayProgress } from './replay.js';
import { createIndexStatements, execAll, SHADOW } from './tables.js';

/**
 * The rebuild's last steps before catching up: loading the counter tables from the folded
 * totals and building every shadow table's indexes, as one list of statements run a few at a
 * time on Postgres (each its own server process), longest first. A counter table's load is
 * followed by its own indexes; the row tables' indexes (their rows are in) fill the other
 * slots meanwhile, one index per step. Returns the counter rows loaded.
 */
export async function loadCountersAndIndex(db: Db, totals: readonly Contribution[], progress: (p: ReplayProgress) => void): Promise<number> {
  const counters = totals
    .flatMap((c) => c.projection.tables.flatMap((spec) => (spec.kind === 'counters' ? [{ spec, entries: c.counters.get(spec.name) ?? new Map<string, CounterEntry>() }] : [])))
    .sort((a, b) => b.entries.size - a.entries.size);
  const rowTables = totals.flatMap((c) => c.projection.tables.filter((t) => t.kind === 'rows'));
  const bytes = await tableBytes(db, rowTables);
  const indexes = rowTables
    .flatMap((t) => createIndexStatements(t, SHADOW).map((statement) => ({ statement, bytes: bytes.get(t.name + SHADOW) ?? 0 })))
    .sort((a, b) => b.bytes - a.bytes)
    .map(({ statement }) => statement);
  const totalIndexes = indexes.length + counters.reduce((n, c) => n + createIndexStatements(c.spec).length, 0);

  let totalRows = 0;
  for (const { entries } of counters) for (const e of entries.values()) if (hasSums(e)) totalRows += 1;
  let written = 0;
  let loaded = 0;
  let countersLeft = counters.length;
  let indexed = 0;
  // Index progress shows once the counter tables are in (the write phase comes first).
  const indexProgress = () => {
    if (countersLeft === 0) progress({ phase: 'index', done: indexed, total: totalIndexes });
  };
  const index = async (statement: string) => {
    await execAll(db.kysely, [statement]);
    indexed += 1;
    indexProgress();
  };

  const tasks: (() => Promise<void>)[] = [
    ...counters.map(({ spec, entries }) => async () => {
      const n = await loadCounters(db, spec, spec.name + SHADOW, entries.values(), (k) => progress({ phase: 'write', done: (written += k), total: totalRows }));
      loaded += n;
      countersLeft -= 1;
      indexProgress();
      for (const statement of createIndexStatements(spec, SHADOW)) await index(statement);
    }),
    ...indexes.map((statement) => () => index(statement)),
  ];
  await inParallel(db.pool !== null ? 3 : 1, tasks, (task) => task());
  return loaded;
}

/** On-disk size of each table (without its indexes), by name. */
async function tableBytes(db: Db, tables: readonly TableSpec[]): Promise<Map<string, number>> {
  if (tables.length === 0) return new Map();
  const { rows } = await sql<{ name: string; bytes: string }>`
    SELECT relname AS name, pg_relation_size(oid)::text AS bytes FROM pg_class
    WHERE relname IN (${sql.join(tables.map((t) => sql.lit(t.name + SHADOW)))})`.execute(db.kysely);
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function inParallel<T>(limit: number, items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
