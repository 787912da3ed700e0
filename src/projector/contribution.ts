import type { Output, Projection, TableSpec, Value } from '../../projections/kit/types.js';

/** A counter row as accumulated: key values, summed values, and one-way max / min values. */
export interface CounterEntry {
  readonly keys: readonly Value[];
  readonly sums: number[];
  readonly maxes: Value[];
  readonly mins: Value[];
}

export interface RowEntry {
  readonly keys: readonly Value[];
  readonly columns: readonly Value[];
}

const SEP = '\u001f';

export function keyOf(values: readonly Value[]): string {
  let key = String(values[0]);
  for (let i = 1; i < values.length; i++) key += SEP + String(values[i]);
  return key;
}

/** Orders values of one column: numbers, decimal-string ids (by magnitude), text. Null is "none". */
export function compareValues(a: Value, b: Value): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const sa = String(a);
  const sb = String(b);
  if (/^\d+$/.test(sa) && /^\d+$/.test(sb) && sa.length !== sb.length) return sa.length - sb.length;
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

export function pick(current: Value, offered: Value, want: 1 | -1): Value {
  if (offered === null) return current;
  if (current === null) return offered;
  return compareValues(offered, current) * want > 0 ? offered : current;
}

/**
 * Everything one projection emits for a set of groups, merged by key: counter rows add up,
 * row-table rows are collected. Used for a single group (so the projector can compare a
 * group's contribution before and after a batch) and for a whole replay.
 */
export class Contribution implements Output {
  readonly counters = new Map<string, Map<string, CounterEntry>>();
  readonly rows = new Map<string, Map<string, RowEntry>>();

  constructor(readonly projection: Projection) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.counters.set(t.name, new Map());
      else this.rows.set(t.name, new Map());
    }
  }

  add(table: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[] = [], mins: readonly Value[] = []): void {
    const entries = this.counters.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no counter table ${table}`);
    addTo(entries, keyOf(keys), keys, sums, maxes, mins);
  }

  row(table: string, keys: readonly Value[], columns: readonly Value[]): void {
    const entries = this.rows.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no row table ${table}`);
    entries.set(keyOf(keys), { keys, columns });
  }
}

/** Changes to apply to one projection's tables. */
export class Delta {
  readonly counters = new Map<string, Map<string, CounterEntry>>();
  readonly deletes = new Map<string, Map<string, readonly Value[]>>();
  readonly upserts = new Map<string, Map<string, RowEntry>>();

  constructor(readonly projection: Projection) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.counters.set(t.name, new Map());
      else {
        this.deletes.set(t.name, new Map());
        this.upserts.set(t.name, new Map());
      }
    }
  }

  get isEmpty(): boolean {
    for (const m of this.counters.values()) if (m.size > 0) return false;
    for (const m of this.upserts.values()) if (m.size > 0) return false;
    for (const m of this.deletes.values()) if (m.size > 0) return false;
    return true;
  }
}

function addTo(out: Map<string, CounterEntry>, key: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): void {
  const entry = out.get(key);
  if (entry === undefined) {
    out.set(key, { keys, sums: [...sums], maxes: [...maxes], mins: [...mins] });
    return;
  }
  for (let i = 0; i < sums.length; i++) entry.sums[i] = (entry.sums[i] ?? 0) + (sums[i] ?? 0);
  for (let i = 0; i < maxes.length; i++) entry.maxes[i] = pick(entry.maxes[i] ?? null, maxes[i] ?? null, 1);
  for (let i = 0; i < mins.length; i++) entry.mins[i] = pick(entry.mins[i] ?? null, mins[i] ?? null, -1);
}

export function sameValues(a: readonly Value[], b: readonly Value[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function tableSpec(projection: Projection, name: string): TableSpec {
  const spec = projection.tables.find((t) => t.name === name);
  if (spec === undefined) throw new Error(`${projection.name}: no table ${name}`);
  return spec;
}
