import type pg from 'pg';
import type { TableSpec } from '../../projections/kit/types.js';
import { copyCounterEntries, type CounterSpec } from './bulk-load.js';
import type { Contribution, CounterEntry } from './contribution.js';
import { type Fence, inFencedTransaction } from './fence.js';
import { allColumns, createTableStatements, sumByKeySql } from './tables.js';

export const SPILL = '__spill';

/**
 * A rebuild's counter totals, held to a bound on Postgres. The fold adds every message's
 * counters into totals in memory (one entry per counter row: a `contact_stats` entry per
 * recipient, …), which grow with the log. Once they hold more than `limit` entries, each counter
 * table's entries are appended (COPY) to an unlogged `<name>__spill` table and the totals start
 * again from empty. When the log is folded, a spilled table's shadow is loaded from its spill and
 * what is left in memory with one `GROUP BY` over its keys: sums added up, one-way columns by
 * `max` / `min` (every such column is a bigint, where they order as the fold does), rows whose
 * sums are all zero left out. The numbers are those of an unspilled fold; memory holds at most
 * `limit` entries, however long the log.
 */
export class CounterSpill {
  /** Entries appended to each table's spill, by table name. */
  readonly #spilled = new Map<string, number>();
  /** The totals' counter maps, gathered at the first look (a rebuild keeps the same ones, emptied by `spill`). */
  #maps: readonly Map<string, CounterEntry>[] | null = null;
  /** Times the totals were spilled. */
  spills = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly limit: number,
    /** Run before each of its writes commits (fence.ts). */
    private readonly fence?: Fence,
  ) {}

  /** Statements that drop what an interrupted rebuild may have left. */
  static dropStatements(spec: TableSpec): string[] {
    return spec.kind === 'counters' ? [`DROP TABLE IF EXISTS ${spec.name}${SPILL}`] : [];
  }

  /** Whether the totals hold more entries than the limit (asked after every message: no allocation). */
  full(totals: readonly Contribution[]): boolean {
    this.#maps ??= totals.flatMap((c) => [...c.counters.values()]);
    let held = 0;
    for (const entries of this.#maps) held += entries.size;
    return held > this.limit;
  }

  /** Appends every counter table's entries to its spill and empties the totals. */
  async spill(totals: readonly Contribution[]): Promise<void> {
    for (const c of totals) {
      for (const spec of c.projection.tables) {
        const entries = c.counters.get(spec.name);
        if (spec.kind !== 'counters' || entries === undefined || entries.size === 0) continue;
        await this.#append(spec, entries.values());
        entries.clear();
      }
    }
    this.spills += 1;
  }

  /** Entries of `spec` spilled so far (0: none; load it from memory). */
  spilled(spec: TableSpec): number {
    return this.#spilled.get(spec.name) ?? 0;
  }

  /**
   * Loads `table` (empty, without its key yet) from `spec`'s spill and `rest`, its entries still
   * in memory, then drops the spill. Returns the rows loaded.
   */
  async load(spec: CounterSpec, table: string, rest: Iterable<CounterEntry>): Promise<number> {
    await this.#append(spec, rest);
    const spill = spec.name + SPILL;
    const names = allColumns(spec).map((c) => c.name).join(', ');
    const rows = await inFencedTransaction(this.pool, this.fence, async (client) => {
      const n = (await client.query(`INSERT INTO ${table} (${names}) ${sumByKeySql(spec, spill)}`)).rowCount ?? 0;
      await client.query(`DROP TABLE ${spill}`);
      return n;
    });
    this.#spilled.delete(spec.name);
    return rows;
  }

  /** Drops every spill left (after a failure; `load` drops its own). */
  async drop(): Promise<void> {
    for (const name of [...this.#spilled.keys()]) {
      await this.pool.query(`DROP TABLE IF EXISTS ${name}${SPILL}`);
      this.#spilled.delete(name);
    }
  }

  async #append(spec: CounterSpec, entries: Iterable<CounterEntry>): Promise<void> {
    const table = spec.name + SPILL;
    let setup: string | undefined;
    if (!this.#spilled.has(spec.name)) {
      // max / min in SQL order as the fold's `pick` does only for numbers.
      const unordered = [...(spec.maxes ?? []), ...(spec.mins ?? [])].filter((c) => c.type !== 'bigint' && c.type !== 'integer');
      if (unordered.length > 0) throw new Error(`${spec.name}: one-way column ${unordered[0]?.name} is ${unordered[0]?.type}; spilled totals can only merge bigint or integer ones`);
      // Unlogged and keyless: written once, read once by the GROUP BY, then dropped. Created in
      // the transaction of its first rows, past the same fence.
      const [create] = createTableStatements(spec, SPILL, false, false);
      setup = (create as string).replace(/^CREATE TABLE/, 'CREATE UNLOGGED TABLE');
    }
    const copied = await copyCounterEntries(this.pool, spec, table, entries, () => {}, { fresh: false, all: true, setup, fence: this.fence });
    this.#spilled.set(spec.name, (this.#spilled.get(spec.name) ?? 0) + copied);
  }
}
