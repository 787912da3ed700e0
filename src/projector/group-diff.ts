import type { Output, Projection, Value } from '../../projections/kit/types.js';
import { type CounterEntry, type Delta, keyOf, pick, sameValues } from './contribution.js';

/** One counter key of one group: what the group contributed before the batch and after it. */
interface CounterChange {
  readonly keys: readonly Value[];
  before: number[] | null;
  after: number[] | null;
  beforeMaxes: Value[];
  afterMaxes: Value[];
  beforeMins: Value[];
  afterMins: Value[];
  /** Whether `before` / `after` are copies of ours (else the projection's arrays, shared, read-only). */
  owned: number;
}

interface RowChange {
  readonly keys: readonly Value[];
  before: readonly Value[] | null;
  after: readonly Value[] | null;
}

const OWN_BEFORE = 1;
const OWN_AFTER = 2;
const NONE: Value[] = [];

/**
 * A projection's output for one group, before the batch (side 0) and after it (side 1), in one
 * map per table, then written into the projection's `Delta` as the difference: counter rows
 * add `after - before` (a row that newly contributes only zeros, or whose sums and one-way
 * bounds did not change, is left out; a row the group no longer contributes to is retracted),
 * a group's row tables get the rows that changed upserted and the rows it no longer has
 * deleted. One instance per projection is reused for every group of a batch.
 */
export class GroupDiff implements Output {
  side: 0 | 1 = 1;
  readonly #counters = new Map<string, Map<string, CounterChange>>();
  readonly #rows = new Map<string, Map<string, RowChange>>();

  constructor(readonly projection: Projection) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.#counters.set(t.name, new Map());
      else this.#rows.set(t.name, new Map());
    }
  }

  add(table: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[] = NONE, mins: readonly Value[] = NONE): void {
    const entries = this.#counters.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no counter table ${table}`);
    const key = keyOf(keys);
    let c = entries.get(key);
    if (c === undefined) {
      c = { keys, before: null, after: null, beforeMaxes: NONE, afterMaxes: NONE, beforeMins: NONE, afterMins: NONE, owned: 0 };
      entries.set(key, c);
    }
    // The first emission of a key is kept as given (projections never change an array they
    // emitted); a second one for the same key and side is added to a copy.
    if (this.side === 0) {
      if (c.before === null) {
        c.before = sums as number[];
        c.beforeMaxes = maxes as Value[];
        c.beforeMins = mins as Value[];
      } else {
        if ((c.owned & OWN_BEFORE) === 0) {
          c.before = [...c.before];
          c.beforeMaxes = [...c.beforeMaxes];
          c.beforeMins = [...c.beforeMins];
          c.owned |= OWN_BEFORE;
        }
        merge(c.before, c.beforeMaxes, c.beforeMins, sums, maxes, mins);
      }
    } else if (c.after === null) {
      c.after = sums as number[];
      c.afterMaxes = maxes as Value[];
      c.afterMins = mins as Value[];
    } else {
      if ((c.owned & OWN_AFTER) === 0) {
        c.after = [...c.after];
        c.afterMaxes = [...c.afterMaxes];
        c.afterMins = [...c.afterMins];
        c.owned |= OWN_AFTER;
      }
      merge(c.after, c.afterMaxes, c.afterMins, sums, maxes, mins);
    }
  }

  row(table: string, keys: readonly Value[], columns: readonly Value[]): void {
    const entries = this.#rows.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no row table ${table}`);
    const key = keyOf(keys);
    const r = entries.get(key);
    if (r === undefined) entries.set(key, this.side === 0 ? { keys, before: columns, after: null } : { keys, before: null, after: columns });
    else if (this.side === 0) r.before = columns;
    else r.after = columns;
  }

  /** Adds the group's change to `delta` and forgets the group. */
  flushInto(delta: Delta): void {
    for (const [table, entries] of this.#counters) {
      if (entries.size === 0) continue;
      const out = delta.counters.get(table) as Map<string, CounterEntry>;
      for (const [key, c] of entries) {
        const { before, after } = c;
        if (after !== null) {
          // A row whose sums are all zero does not exist (a replay never writes one).
          if (before === null) {
            if (!allZero(after)) addToDelta(out, key, c.keys, after, c.afterMaxes, c.afterMins);
            continue;
          }
          const sums = new Array<number>(after.length);
          let zero = true;
          for (let i = 0; i < after.length; i++) if ((sums[i] = (after[i] ?? 0) - (before[i] ?? 0)) !== 0) zero = false;
          if (zero && sameValues(c.beforeMaxes, c.afterMaxes) && sameValues(c.beforeMins, c.afterMins)) continue;
          addToDelta(out, key, c.keys, sums, c.afterMaxes, c.afterMins);
        } else if (before !== null && !allZero(before)) {
          addToDelta(out, key, c.keys, before.map((v) => -v), NONE, NONE);
        }
      }
      entries.clear();
    }
    for (const [table, entries] of this.#rows) {
      if (entries.size === 0) continue;
      const upserts = delta.upserts.get(table) as Map<string, { keys: readonly Value[]; columns: readonly Value[] }>;
      const deletes = delta.deletes.get(table) as Map<string, readonly Value[]>;
      for (const [key, r] of entries) {
        if (r.after !== null) {
          if (r.before === null || !sameValues(r.before, r.after)) upserts.set(key, { keys: r.keys, columns: r.after });
        } else if (r.before !== null) {
          deletes.set(key, r.keys);
        }
      }
      entries.clear();
    }
  }
}

function allZero(values: readonly number[]): boolean {
  for (const v of values) if (v !== 0) return false;
  return true;
}

function merge(sums: number[], maxes: Value[], mins: Value[], addSums: readonly number[], addMaxes: readonly Value[], addMins: readonly Value[]): void {
  for (let i = 0; i < addSums.length; i++) sums[i] = (sums[i] ?? 0) + (addSums[i] ?? 0);
  for (let i = 0; i < addMaxes.length; i++) maxes[i] = pick(maxes[i] ?? null, addMaxes[i] ?? null, 1);
  for (let i = 0; i < addMins.length; i++) mins[i] = pick(mins[i] ?? null, addMins[i] ?? null, -1);
}

/** A delta row; `owned` once its arrays are copies (before that they may be shared with a projection's output). */
interface DeltaEntry extends CounterEntry {
  owned?: true;
}

function addToDelta(out: Map<string, CounterEntry>, key: string, keys: readonly Value[], sums: number[], maxes: readonly Value[], mins: readonly Value[]): void {
  const entry = out.get(key) as DeltaEntry | undefined;
  if (entry === undefined) {
    out.set(key, { keys, sums, maxes: maxes as Value[], mins: mins as Value[] });
    return;
  }
  let target = entry;
  if (entry.owned !== true) {
    target = { keys: entry.keys, sums: [...entry.sums], maxes: [...entry.maxes], mins: [...entry.mins], owned: true };
    out.set(key, target);
  }
  merge(target.sums, target.maxes, target.mins, sums, maxes, mins);
}
