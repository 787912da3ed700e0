import { sql } from 'kysely';
import type { TableSpec } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { hasSums, loadCounters } from './bulk-load.js';
import type { CounterSpill } from './counter-spill.js';
import type { Contribution, CounterEntry } from './contribution.js';
import type { Fence } from './fence.js';
import type { ReplayProgress } from './replay.js';
import { createIndexStatements, createTableStatements, execAll, SHADOW } from './tables.js';

/**
 * How a rebuild's shadow tables are built, and its last steps before catching up.
 *
 * On Postgres, row tables are streamed in by COPY while the log is read and folded (see
 * `copy-shadow-rows.ts`). The fold keeps one core busy and the COPY little of the other, so the
 * row tables are created with every index and Postgres keeps them up as the rows come, on that
 * otherwise idle core. Counter tables are loaded whole once the log is folded: they are created
 * bare and get their primary key and indexes afterwards, each built by sorting the loaded rows
 * (keeping a key up to date costs a COPY of rows in random key order about twice as much).
 *
 * On PGlite (one session: nothing runs beside the fold), every table is created with its
 * primary key and gets its other indexes after the load.
 */
export function createShadowStatements(db: Db, spec: TableSpec): string[] {
  if (db.pool === null) return createTableStatements(spec, SHADOW, false);
  return spec.kind === 'rows' ? createTableStatements(spec, SHADOW, true) : createTableStatements(spec, SHADOW, false, false);
}

/**
 * What is left once the log is folded and the row tables' rows are in: the counter tables
 * loaded from the folded totals, and the indexes `createShadowStatements` left out. The work
 * runs a few statements at a time on Postgres (each its own server process), longest first:
 * a counter table's load is followed by its key and index builds, each a statement of its own
 * that may run beside the others. A counter table whose totals were spilled during the fold is
 * loaded by its spill's `GROUP BY` (see `counter-spill.ts`). Returns the counter rows loaded.
 */
export async function loadCountersAndIndex(
  db: Db,
  totals: readonly Contribution[],
  progress: (p: ReplayProgress) => void,
  spill: CounterSpill | null,
  fence: Fence,
): Promise<number> {
  const counters = totals
    .flatMap((c) => c.projection.tables.flatMap((spec) => (spec.kind === 'counters' ? [{ spec, entries: c.counters.get(spec.name) ?? new Map<string, CounterEntry>() }] : [])))
    .sort((a, b) => b.entries.size - a.entries.size);
  const rowTables = db.pool === null ? totals.flatMap((c) => c.projection.tables.filter((t) => t.kind === 'rows')) : [];
  const bytes = await tableBytes(db, rowTables);
  const rowIndexes = rowTables
    .flatMap((t) => createIndexStatements(t, SHADOW).map((statement) => ({ statement, bytes: bytes.get(t.name + SHADOW) ?? 0 })))
    .sort((a, b) => b.bytes - a.bytes)
    .map(({ statement }) => statement);
  const counterIndexes = (spec: TableSpec): string[][] =>
    db.pool === null ? createIndexStatements(spec, SHADOW).map((s) => [s]) : [keyStatements(spec), ...createIndexStatements(spec, SHADOW).map((s) => [s])];
  const totalIndexes = rowIndexes.length + counters.reduce((n, c) => n + counterIndexes(c.spec).length, 0);

  // A spilled table's rows are known once its GROUP BY has run: its entries count until then.
  const spilled = (spec: TableSpec) => spill?.spilled(spec) ?? 0;
  let totalRows = 0;
  for (const { spec, entries } of counters) {
    if (spilled(spec) > 0) totalRows += spilled(spec) + entries.size;
    else for (const e of entries.values()) if (hasSums(e)) totalRows += 1;
  }
  let written = 0;
  let loaded = 0;
  let countersLeft = counters.length;
  let indexed = 0;
  // Index progress shows once the counter tables are in (the write phase comes first).
  const indexProgress = () => {
    if (countersLeft === 0) progress({ phase: 'index', done: indexed, total: totalIndexes, gauge: 'steps' });
  };
  const index = (statements: readonly string[]): Task => async () => {
    await db.kysely.transaction().execute(async (trx) => {
      await execAll(trx, statements);
      await fence(trx);
    });
    indexed += 1;
    indexProgress();
    return [];
  };

  const tasks: Task[] = [
    ...counters.map(({ spec, entries }): Task => async () => {
      const table = spec.name + SHADOW;
      let n: number;
      if (spill !== null && spilled(spec) > 0) {
        const counted = spilled(spec) + entries.size;
        n = await spill.load(spec, table, entries.values());
        progress({ phase: 'write', done: (written += counted), total: totalRows });
      } else {
        n = await loadCounters(db, spec, table, entries.values(), (k) => progress({ phase: 'write', done: (written += k), total: totalRows }), fence);
      }
      loaded += n;
      countersLeft -= 1;
      indexProgress();
      return counterIndexes(spec).map(index);
    }),
    ...rowIndexes.map((statement) => index([statement])),
  ];
  await runTasks(db.pool !== null ? 3 : 1, tasks);
  return loaded;
}

/**
 * The primary key of a counter table created without it: a unique index built from the loaded
 * rows, then made the key. The table's other index builds may run beside the unique index's;
 * the `ALTER TABLE` that makes it the key waits for those still running to finish.
 */
export function keyStatements(spec: TableSpec, suffix = SHADOW): string[] {
  const table = spec.name + suffix;
  const name = `${table}_pkey`;
  return [`CREATE UNIQUE INDEX ${name} ON ${table} (${spec.keys.map((k) => k.name).join(', ')})`, `ALTER TABLE ${table} ADD CONSTRAINT ${name} PRIMARY KEY USING INDEX ${name}`];
}

/** A step of work; returns the steps it made possible (they run before those still waiting). */
export type Task = () => Promise<Task[]>;

/** Runs `tasks` and those they return, at most `limit` at a time; rejects with the first failure once the running ones have ended. */
export function runTasks(limit: number, tasks: readonly Task[]): Promise<void> {
  const queue = [...tasks];
  let running = 0;
  let failure: { err: unknown } | null = null;
  return new Promise((resolve, reject) => {
    const pump = () => {
      while (failure === null && running < limit && queue.length > 0) {
        const task = queue.shift() as Task;
        running += 1;
        task().then(
          (next) => {
            running -= 1;
            queue.unshift(...next);
            pump();
          },
          (err: unknown) => {
            running -= 1;
            failure ??= { err };
            pump();
          },
        );
      }
      if (running > 0) return;
      if (failure !== null) reject(failure.err);
      else if (queue.length === 0) resolve();
    };
    pump();
  });
}

/** On-disk size of each table (without its indexes), by name. */
async function tableBytes(db: Db, tables: readonly TableSpec[]): Promise<Map<string, number>> {
  if (tables.length === 0) return new Map();
  const { rows } = await sql<{ name: string; bytes: string }>`
    SELECT relname AS name, pg_relation_size(oid)::text AS bytes FROM pg_class
    WHERE relname IN (${sql.join(tables.map((t) => sql.lit(t.name + SHADOW)))})`.execute(db.kysely);
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}
