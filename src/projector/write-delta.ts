import { type Kysely, sql } from 'kysely';
import type { ColumnSpec, TableSpec, Value } from '../../projections/kit/types.js';
import type { Database } from '../db/schema.js';
import { type CounterEntry, type Delta, tableSpec } from './contribution.js';
import { SQL_RECORD_TYPES } from './sql-types.js';
import { allColumns } from './tables.js';

/**
 * Writes one projection's delta: counter rows upserted (`n = t.n + excluded.n`, GREATEST /
 * LEAST for one-way columns) and emptied rows deleted; a group's rows upserted, and those it no
 * longer has deleted.
 * Rows travel as one JSON parameter (see `records`), which both drivers handle.
 */
export async function writeDelta(trx: Kysely<Database>, delta: Delta, suffix = ''): Promise<void> {
  const p = delta.projection;
  for (const [name, entries] of delta.counters) {
    if (entries.size === 0) continue;
    await upsertCounters(trx, tableSpec(p, name), [...entries.values()], suffix);
  }
  for (const [name, deletes] of delta.deletes) {
    if (deletes.size === 0) continue;
    const spec = tableSpec(p, name);
    const table = spec.name + suffix;
    const match = spec.keys.map((k) => `t.${k.name} = d.${k.name}`).join(' AND ');
    await sql`DELETE FROM ${sql.raw(table)} AS t USING ${records(spec.keys, [...deletes.values()])} WHERE ${sql.raw(match)}`.execute(trx);
  }
  for (const [name, upserts] of delta.upserts) {
    if (upserts.size === 0) continue;
    const spec = tableSpec(p, name);
    await insertRows(trx, spec, [...upserts.values()].map((r) => [...r.keys, ...r.columns]), suffix, true);
  }
}

async function upsertCounters(trx: Kysely<Database>, spec: TableSpec, entries: CounterEntry[], suffix: string): Promise<void> {
  if (spec.kind !== 'counters') throw new Error(`${spec.name} is not a counter table`);
  const table = spec.name + suffix;
  const maxes = spec.maxes ?? [];
  const mins = spec.mins ?? [];
  const columns = [...spec.keys, ...spec.sums, ...maxes, ...mins];
  const values = entries.map((e) => [...e.keys, ...e.sums, ...padded(e.maxes, maxes.length), ...padded(e.mins, mins.length)]);
  // Rows travel as JSON arrays; see `records`.
  const names = columns.map((c) => c.name).join(', ');
  const updates = [
    ...spec.sums.map((c) => `${c.name} = t.${c.name} + excluded.${c.name}`),
    ...maxes.map((c) => `${c.name} = GREATEST(t.${c.name}, excluded.${c.name})`),
    ...mins.map((c) => `${c.name} = LEAST(t.${c.name}, excluded.${c.name})`),
  ].join(', ');
  await sql`
    INSERT INTO ${sql.raw(table)} AS t (${sql.raw(names)})
    SELECT ${sql.raw(names)} FROM ${records(columns, values)}
    ON CONFLICT (${sql.raw(spec.keys.map((k) => k.name).join(', '))}) DO UPDATE SET ${sql.raw(updates)}`.execute(trx);

  // Only a retraction can empty a row.
  const shrinking = entries.filter((e) => e.sums.some((v) => v < 0)).map((e) => [...e.keys]);
  if (shrinking.length === 0) return;
  const match = spec.keys.map((k) => `t.${k.name} = d.${k.name}`).join(' AND ');
  const empty = spec.sums.map((c) => `t.${c.name} = 0`).join(' AND ');
  await sql`DELETE FROM ${sql.raw(table)} AS t USING ${records(spec.keys, shrinking)} WHERE ${sql.raw(match)} AND ${sql.raw(empty)}`.execute(trx);
}

/** Inserts rows; with `replace`, a row whose key is already there takes the new values. */
export async function insertRows(trx: Kysely<Database>, spec: TableSpec, rows: readonly (readonly Value[])[], suffix = '', replace = false): Promise<void> {
  const table = spec.name + suffix;
  const columns = allColumns(spec);
  const names = columns.map((c) => c.name).join(', ');
  const keys = new Set(spec.keys.map((k) => k.name));
  const updates = columns.filter((c) => !keys.has(c.name)).map((c) => `${c.name} = excluded.${c.name}`);
  const onConflict = replace && updates.length > 0 ? `ON CONFLICT (${[...keys].join(', ')}) DO UPDATE SET ${updates.join(', ')}` : '';
  await sql`
    INSERT INTO ${sql.raw(table)} (${sql.raw(names)})
    SELECT ${sql.raw(names)} FROM ${records(columns, rows)} ${sql.raw(onConflict)}`.execute(trx);
}

function padded(values: readonly Value[], n: number): Value[] {
  return Array.from({ length: n }, (_, i) => values[i] ?? null);
}

/**
 * Rows as one JSON parameter — an array of arrays, ids as strings — unpacked by Postgres into
 * typed columns named after `columns`: `(SELECT (r->>0)::bigint AS api_key_id, … FROM
 * json_array_elements($1) r) AS d`.
 */
function records(columns: readonly ColumnSpec[], rows: readonly (readonly Value[])[]) {
  const select = columns.map((c, i) => `(r->>${i})::${SQL_RECORD_TYPES[c.type]} AS ${c.name}`).join(', ');
  return sql`(SELECT ${sql.raw(select)} FROM json_array_elements(${JSON.stringify(rows)}::json) AS r) AS d`;
}
