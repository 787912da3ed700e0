import type { TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { CopyShadowRows } from './copy-shadow-rows.js';
import type { Fence } from './fence.js';
import { insertRows } from './write-delta.js';

/**
 * Where a rebuild's fold puts row-table rows. Each row belongs to exactly one group and a
 * rebuild folds each group once, so rows go out as they come, with nothing to merge.
 */
export interface ShadowRows {
  /** Rows handed over so far. */
  readonly rows: number;
  row(spec: TableSpec, keys: readonly Value[], columns: readonly Value[]): void;
  /** Called by the fold now and then: lets writes proceed, and waits while too much is pending. */
  room(): Promise<void>;
  /** Writes whatever is pending; the rows are in their tables once it resolves. */
  finish(): Promise<void>;
  /** Releases what it holds (after `finish`, or to give up). */
  close(): Promise<void>;
}

/**
 * COPY on Postgres, its one transaction committed past the `fence` (a replay's: fence.ts);
 * multi-row inserts on PGlite (one session, nothing to overlap with; one process, by the data
 * directory's lock, so no other replay to fence off).
 */
export function openShadowRows(db: Db, suffix: string, fence?: Fence): ShadowRows {
  return db.pool !== null ? new CopyShadowRows(db.pool, suffix, fence) : new InsertedShadowRows(db, suffix);
}

class InsertedShadowRows implements ShadowRows {
  private readonly pending = new Map<TableSpec, (readonly Value[])[]>();
  rows = 0;

  constructor(
    private readonly db: Db,
    private readonly suffix: string,
    private readonly batch = 5_000,
  ) {}

  row(spec: TableSpec, keys: readonly Value[], columns: readonly Value[]): void {
    let rows = this.pending.get(spec);
    if (rows === undefined) this.pending.set(spec, (rows = []));
    rows.push([...keys, ...columns]);
    this.rows += 1;
  }

  async room(): Promise<void> {
    await this.write(this.batch);
  }

  async finish(): Promise<void> {
    await this.write(1);
  }

  async close(): Promise<void> {
    this.pending.clear();
  }

  private async write(atLeast: number): Promise<void> {
    for (const [spec, rows] of this.pending) {
      if (rows.length < atLeast) continue;
      this.pending.set(spec, []);
      await insertRows(this.db.kysely, spec, rows, this.suffix);
    }
  }
}
