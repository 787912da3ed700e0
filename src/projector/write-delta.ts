import { CompiledQuery, type Kysely, sql } from 'kysely';
import type { ColumnSpec, TableSpec, Value } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import type { Database } from '../db/schema.js';
import type { Delta } from './contribution.js';
import { arrayElement, arrayLiteral, unnestRows } from './sql-arrays.js';
import { SQL_RECORD_TYPES } from './sql-types.js';
import { run, type Statement, statement } from './statements.js';
import { allColumns } from './tables.js';

/**
 * Checkpoints a write moves, each only from the position its batch started at, and only if the
 * read models were built by the version of the code that folded the batch.
 */
export interface CheckpointMoves {
  readonly moves: readonly { readonly name: string; readonly expected: bigint; readonly version: number }[];
  readonly to: bigint;
}

/**
 * Writes deltas — counter rows upserted (`n = t.n + excluded.n`, GREATEST / LEAST for one-way
 * columns) and those a retraction brings to zero deleted; a group's rows upserted, and those it
 * no longer has deleted — and moves the checkpoints, all in ONE statement of data-modifying
 * CTEs: one round trip, atomic on its own. The checkpoints are locked and compared first; if
 * one is not where the batch expects (another runner moved it), or records another version of
 * the projection's code (a rebuild by a newer or older version swapped its tables in), nothing
 * is written and the result is false.
 *
 * A write that moves checkpoints (the live projector's) commits without waiting for its WAL to
 * reach the disk (`synchronous_commit = off` for its own transaction): read models are derived
 * from the log, and the checkpoints move in the same transaction as the deltas, so a database
 * crash can only take back the last few batches whole, and the projector folds them again from
 * the log, whose appends do wait for the disk (runner.ts notices: its next write, or an idle
 * wake-up, finds the checkpoints elsewhere). The rows are visible as soon as the statement
 * commits either way; what it saves is the flush, for which these writes queued behind ingest's
 * commits (the freshness bench's p99 at 5k/s, in the README). A rebuild's shadow writes (no
 * checkpoint) keep the default.
 *
 * Rows travel as one array per column (see `sql-arrays.ts`), so the statement's text depends
 * only on which tables get which kind of change: a handful of texts, each a prepared statement
 * (see `statements.ts`). Tables come in registry order, as a rebuild's swap locks them.
 */
export async function writeDeltas(db: Db, deltas: readonly Delta[], suffix = '', checkpoints: CheckpointMoves | null = null): Promise<boolean> {
  const { statement: s, params } = writeQuery(deltas, suffix, checkpoints);
  const rows = await run<{ ok: boolean }>(db, s, params);
  return rows[0]?.ok === true;
}

/** `writeDeltas` of shadow tables (no checkpoint) within a transaction: the replay's catch-up, with its leases confirmed in it (replay.ts). */
export async function writeDeltasWithin(trx: Kysely<Database>, deltas: readonly Delta[], suffix: string): Promise<void> {
  const { statement: s, params } = writeQuery(deltas, suffix, null);
  await trx.executeQuery(CompiledQuery.raw(s.text, params));
}

/** One data-modifying CTE: deleting emptied counter rows, upserting counter rows, deleting rows, upserting rows. */
interface Part {
  readonly kind: 'empty' | 'add' | 'delete' | 'upsert';
  readonly spec: TableSpec;
  /** One array literal per column of `partColumns`. */
  readonly arrays: readonly string[];
}

/** The statement and parameters of `writeDeltas`. */
export function writeQuery(deltas: readonly Delta[], suffix: string, checkpoints: CheckpointMoves | null): { statement: Statement; params: string[] } {
  const parts: Part[] = [];
  for (const delta of deltas) {
    for (const spec of delta.projection.tables) {
      if (spec.kind === 'counters') {
        const entries = delta.counters.get(spec.name);
        if (entries === undefined || entries.size === 0) continue;
        const empty = new ArrayLiterals(spec.keys, spec.sums);
        const add = new ArrayLiterals(spec.keys, spec.sums, spec.maxes ?? [], spec.mins ?? []);
        for (const e of entries.values()) {
          // Only a retraction can empty a row.
          if (e.sums.some((v) => v < 0)) empty.row(e.keys, e.sums);
          add.row(e.keys, e.sums, e.maxes, e.mins);
        }
        if (empty.rows > 0) parts.push({ kind: 'empty', spec, arrays: empty.literals() });
        parts.push({ kind: 'add', spec, arrays: add.literals() });
      } else {
        const deletes = delta.deletes.get(spec.name);
        const upserts = delta.upserts.get(spec.name);
        const gone = new ArrayLiterals(spec.keys);
        // A key both deleted and upserted ends upserted: one statement must touch a row only once.
        if (deletes !== undefined) for (const [key, keys] of deletes) if (upserts?.has(key) !== true) gone.row(keys);
        if (gone.rows > 0) parts.push({ kind: 'delete', spec, arrays: gone.literals() });
        if (upserts === undefined || upserts.size === 0) continue;
        const rows = new ArrayLiterals(spec.keys, spec.kind === 'rows' ? spec.columns : []);
        for (const r of upserts.values()) rows.row(r.keys, r.columns);
        parts.push({ kind: 'upsert', spec, arrays: rows.literals() });
      }
    }
  }
  const moves = checkpoints?.moves ?? [];
  const params: string[] = [];
  if (moves.length > 0) {
    params.push(
      arrayLiteral('text', moves.map((m) => m.name)),
      arrayLiteral('bigint', moves.map((m) => String(m.expected))),
      arrayLiteral('integer', moves.map((m) => String(m.version))),
      String(checkpoints?.to ?? 0n),
    );
  }
  for (const part of parts) params.push(...part.arrays);
  return { statement: writeStatement(parts, suffix, moves.length), params };
}

/** Array literals built a row at a time (see `sql-arrays.ts`): each column's elements gathered, then joined once. */
class ArrayLiterals {
  rows = 0;
  readonly #types: readonly ColumnSpec['type'][];
  readonly #out: string[][];
  readonly #widths: readonly [number, number, number, number];

  /** `runs`: the columns of each run of values a row is given in. */
  constructor(...runs: (readonly ColumnSpec[])[]) {
    const columns = runs.flat();
    this.#types = columns.map((c) => c.type);
    this.#out = columns.map(() => []);
    this.#widths = [runs[0]?.length ?? 0, runs[1]?.length ?? 0, runs[2]?.length ?? 0, runs[3]?.length ?? 0];
  }

  /** A row from consecutive runs of values, each padded with nulls (or cut) to its column count. */
  row(a: readonly Value[], b: readonly Value[] = NO_VALUES, c: readonly Value[] = NO_VALUES, d: readonly Value[] = NO_VALUES): void {
    this.rows += 1;
    const [wa, wb, wc, wd] = this.#widths;
    let i = 0;
    for (let k = 0; k < wa; k++) this.#add(i++, a[k] ?? null);
    for (let k = 0; k < wb; k++) this.#add(i++, b[k] ?? null);
    for (let k = 0; k < wc; k++) this.#add(i++, c[k] ?? null);
    for (let k = 0; k < wd; k++) this.#add(i++, d[k] ?? null);
  }

  #add(i: number, v: Value): void {
    (this.#out[i] as string[]).push(arrayElement(this.#types[i] ?? 'text', v));
  }

  literals(): string[] {
    return this.#out.map((elements) => `{${elements.join(',')}}`);
  }
}

const NO_VALUES: readonly Value[] = [];

function partColumns(part: Pick<Part, 'kind' | 'spec'>): readonly ColumnSpec[] {
  const spec = part.spec;
  switch (part.kind) {
    case 'empty':
      return spec.kind === 'counters' ? [...spec.keys, ...spec.sums] : [];
    case 'delete':
      return spec.keys;
    default:
      return allColumns(spec);
  }
}

const statements = new Map<string, Statement>();

/** The statement text for these parts (cached: few combinations occur). */
function writeStatement(parts: readonly Part[], suffix: string, moves: number): Statement {
  const id = `${suffix}|${moves}|${parts.map((p) => `${p.spec.name}:${p.kind}`).join(',')}`;
  let s = statements.get(id);
  if (s === undefined) {
    s = statement(writeText(parts, suffix, moves));
    statements.set(id, s);
  }
  return s;
}

function writeText(parts: readonly Pick<Part, 'kind' | 'spec'>[], suffix: string, moves: number): string {
  let n = 0;
  const param = (type: string) => `$${++n}::text::${type}[]`;
  const ok = moves > 0 ? '(SELECT ok FROM ok)' : 'true';
  const ctes: string[] = [];
  if (moves > 0) {
    const names = param('text');
    const expected = param('bigint');
    const versions = param('integer');
    const to = `$${++n}::text::bigint`;
    // A checkpoint with no version recorded (its projection has no row in `projections`) takes any.
    ctes.push(
      `cp AS (SELECT c.name FROM checkpoints c JOIN unnest(${names}, ${expected}, ${versions}) AS m(name, expected, version)
        ON c.name = m.name AND c.position = m.expected AND (c.version IS NULL OR c.version = m.version) FOR UPDATE OF c)`,
      `ok AS (SELECT count(*) = ${moves} AS ok FROM cp)`,
      `moved AS (UPDATE checkpoints c SET position = ${to}, updated_at = now() FROM cp WHERE c.name = cp.name AND ${ok})`,
    );
  }
  const unnest = (columns: readonly ColumnSpec[], alias: string) =>
    `unnest(${columns.map((c) => param(SQL_RECORD_TYPES[c.type])).join(', ')}) AS ${alias}(${columns.map((c) => c.name).join(', ')})`;
  const match = (keys: readonly ColumnSpec[], a: string, b: string) => keys.map((k) => `${a}.${k.name} = ${b}.${k.name}`).join(' AND ');
  parts.forEach((part, i) => {
    const spec = part.spec;
    const table = spec.name + suffix;
    const keyNames = spec.keys.map((k) => k.name).join(', ');
    const columns = partColumns(part);
    const names = columns.map((c) => c.name).join(', ');
    switch (part.kind) {
      case 'empty': {
        // The rows a retraction empties are deleted, and the upsert (next) leaves them alone.
        const zero = spec.kind === 'counters' ? spec.sums.map((c) => `t.${c.name} + s.${c.name} = 0`).join(' AND ') : 'false';
        ctes.push(
          `p${i} AS (DELETE FROM ${table} AS t USING ${unnest(columns, 's')} WHERE ${match(spec.keys, 't', 's')} AND ${zero} AND ${ok} RETURNING ${spec.keys.map((k) => `t.${k.name}`).join(', ')})`,
        );
        break;
      }
      case 'add': {
        if (spec.kind !== 'counters') throw new Error(`${spec.name} is not a counter table`);
        const updates = [
          ...spec.sums.map((c) => `${c.name} = t.${c.name} + excluded.${c.name}`),
          ...(spec.maxes ?? []).map((c) => `${c.name} = GREATEST(t.${c.name}, excluded.${c.name})`),
          ...(spec.mins ?? []).map((c) => `${c.name} = LEAST(t.${c.name}, excluded.${c.name})`),
        ].join(', ');
        const emptied = parts[i - 1]?.kind === 'empty' && parts[i - 1]?.spec === spec ? ` AND NOT EXISTS (SELECT 1 FROM p${i - 1} x WHERE ${match(spec.keys, 'x', 'd')})` : '';
        ctes.push(`p${i} AS (INSERT INTO ${table} AS t (${names}) SELECT ${names} FROM ${unnest(columns, 'd')} WHERE ${ok}${emptied} ON CONFLICT (${keyNames}) DO UPDATE SET ${updates})`);
        break;
      }
      case 'delete':
        ctes.push(`p${i} AS (DELETE FROM ${table} AS t USING ${unnest(columns, 'd')} WHERE ${match(spec.keys, 't', 'd')} AND ${ok})`);
        break;
      case 'upsert': {
        const updates = spec.kind === 'rows' ? spec.columns.map((c) => `${c.name} = excluded.${c.name}`).join(', ') : '';
        ctes.push(`p${i} AS (INSERT INTO ${table} (${names}) SELECT ${names} FROM ${unnest(columns, 'd')} WHERE ${ok} ON CONFLICT (${keyNames}) DO ${updates.length > 0 ? `UPDATE SET ${updates}` : 'NOTHING'})`);
        break;
      }
    }
  });
  if (ctes.length === 0) return 'SELECT true AS ok';
  const asyncCommit = moves > 0 ? `, set_config('synchronous_commit', 'off', true) AS commit_mode` : '';
  return `WITH ${ctes.join(',\n')}\nSELECT ${ok} AS ok${asyncCommit}`;
}

/** Inserts rows; with `replace`, a row whose key is already there takes the new values. */
export async function insertRows(db: Kysely<Database>, spec: TableSpec, rows: readonly (readonly Value[])[], suffix = '', replace = false): Promise<void> {
  const columns = allColumns(spec);
  const names = sql.raw(columns.map((c) => c.name).join(', '));
  const keys = new Set(spec.keys.map((k) => k.name));
  const updates = columns.filter((c) => !keys.has(c.name)).map((c) => `${c.name} = excluded.${c.name}`);
  const onConflict = sql.raw(replace && updates.length > 0 ? `ON CONFLICT (${[...keys].join(', ')}) DO UPDATE SET ${updates.join(', ')}` : '');
  await sql`INSERT INTO ${sql.raw(spec.name + suffix)} (${names}) SELECT ${names} FROM ${unnestRows(columns, rows)} ${onConflict}`.execute(db);
}
