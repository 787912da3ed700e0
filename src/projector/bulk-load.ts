import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import type { CounterEntry } from './contribution.js';
import { CopyText } from './copy-text.js';
import { type Fence, inFencedTransaction } from './fence.js';
import { allColumns } from './tables.js';
import { insertRows } from './write-delta.js';

export type CounterSpec = Extract<TableSpec, { kind: 'counters' }>;

/**
 * Loads a counter table's rows (those whose sums are not all zero) into an empty (shadow) table
 * as fast as the driver allows: COPY on Postgres (rows frozen), large JSON-parameter inserts on
 * PGlite.
 * `onRows` reports progress; returns the rows loaded.
 */
export async function loadCounters(db: Db, spec: CounterSpec, table: string, entries: Iterable<CounterEntry>, onRows: (n: number) => void, fence: Fence): Promise<number> {
  if (db.pool === null) {
    const nMax = spec.maxes?.length ?? 0;
    const nMin = spec.mins?.length ?? 0;
    let rows: Value[][] = [];
    let loaded = 0;
    const flush = async () => {
      await insertRows(db.kysely, spec, rows, table.slice(spec.name.length));
      onRows(rows.length);
      loaded += rows.length;
      rows = [];
    };
    for (const e of entries) {
      if (!hasSums(e)) continue;
      rows.push([...e.keys, ...e.sums, ...padded(e.maxes, nMax), ...padded(e.mins, nMin)]);
      if (rows.length >= 5_000) await flush();
    }
    if (rows.length > 0) await flush();
    return loaded;
  }
  return copyCounterEntries(db.pool, spec, table, entries, onRows, { fresh: true, all: false, fence });
}

/**
 * COPY of counter entries into `table` on Postgres. `fresh`: the table is new or empty and
 * emptied in the same transaction, so the rows are written frozen. `all`: entries whose sums are
 * all zero go too (a partial total: its one-way columns still count). `setup`: a statement run
 * first in the same transaction; `fence`: run before the commit (fence.ts). Returns the rows copied.
 */
export async function copyCounterEntries(
  pool: pg.Pool,
  spec: CounterSpec,
  table: string,
  entries: Iterable<CounterEntry>,
  onRows: (n: number) => void,
  { fresh, all, setup, fence }: { fresh: boolean; all: boolean; setup?: string | undefined; fence?: Fence | undefined },
): Promise<number> {
  const nMax = spec.maxes?.length ?? 0;
  const nMin = spec.mins?.length ?? 0;
  const chunks: Buffer[] = [];
  const text = new CopyText((chunk, n) => {
    chunks.push(chunk);
    onRows(n);
  });
  function* copyChunks(): Generator<Buffer> {
    for (const e of entries) {
      if (!all && !hasSums(e)) continue;
      text.begin();
      text.values(e.keys);
      text.values(e.sums);
      text.padded(e.maxes, nMax);
      text.padded(e.mins, nMin);
      text.end();
      while (chunks.length > 0) yield chunks.shift() as Buffer;
    }
    text.flush();
    yield* chunks;
  }
  const names = allColumns(spec).map((c) => c.name).join(', ');
  await inFencedTransaction(pool, fence, async (client) => {
    // Emptied (it is empty already) in the transaction that fills it, so COPY may write its rows frozen.
    if (fresh) await client.query(`TRUNCATE ${table}`);
    if (setup !== undefined) await client.query(setup);
    await pipeline(copyChunks(), client.query(copyFrom(`COPY ${table} (${names}) FROM STDIN${fresh ? ' WITH (FREEZE)' : ''}`)) as unknown as NodeJS.WritableStream);
  });
  return text.rows;
}

/** A counter row whose sums are all zero is not stored. */
export function hasSums(e: CounterEntry): boolean {
  for (const v of e.sums) if (v !== 0) return true;
  return false;
}

function padded(values: readonly Value[], n: number): Value[] {
  return Array.from({ length: n }, (_, i) => values[i] ?? null);
}
