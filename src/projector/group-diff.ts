import type { Output, Projection, Value } from '../../projections/kit/types.js';
import { accumulateBounds, type Delta, type IndexedEntries, keyOf, sameValues } from './contribution.js';

/** One counter key of one group, matched by key: what the group contributed before the batch and after it. */
interface CounterChange {
  readonly keys: readonly Value[];
  before: readonly number[] | null;
  after: readonly number[] | null;
  beforeMaxes: readonly Value[];
  afterMaxes: readonly Value[];
  beforeMins: readonly Value[];
  afterMins: readonly Value[];
}

interface RowChange {
  readonly keys: readonly Value[];
  before: readonly Value[] | null;
  after: readonly Value[] | null;
}

/** A counter row as a projection emitted it. */
interface Emission {
  table: string;
  keys: readonly Value[];
  sums: readonly number[];
  maxes: readonly Value[];
  mins: readonly Value[];
}

const NONE: Value[] = [];

/**
 * A projection's output for one group, before the batch (side 0) and after it (side 1), then
 * written into the projection's `Delta` as the difference: counter rows add `after - before`
 * (a row that newly contributes only zeros, or whose sums and one-way bounds did not change, is
 * left out; a row the group no longer contributes to is retracted), a group's row tables get the
 * rows that changed upserted and the rows it no longer has deleted. One instance per projection
 * is reused for every group of a batch.
 *
 * Counter rows are matched by position first: a projection folding a group that gained events
 * emits the same keys in the same order as before, and then the i-th row after the batch is
 * compared with the i-th before, with no key string built for a row that did not change. From
 * the first row that does not match, the rest of both sides are matched by key. Rows after the
 * last one before are new. This relies on a projection emitting each key of a table at most once
 * per group (`Output`); a test holds every projection to it.
 */
export class GroupDiff implements Output {
  side: 0 | 1 = 1;
  /** Side 0's counter rows in order, and how many there are. */
  readonly #before: Emission[] = [];
  #beforeCount = 0;
  /** Side 1's counter rows matched with side 0's of the same index: how many, and their values. */
  readonly #after: Emission[] = [];
  #matched = 0;
  /** Side 1's rows past the end of side 0 (new keys). */
  readonly #added: Emission[] = [];
  #addedCount = 0;
  /** After a row that does not match: the rest of both sides, by table and key. */
  #unmatched = false;
  /** Per counter table (every one has its map). */
  readonly #byKey = new Map<string, Map<string, CounterChange>>();
  readonly #rows = new Map<string, Map<string, RowChange>>();

  constructor(readonly projection: Projection) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.#byKey.set(t.name, new Map());
      else this.#rows.set(t.name, new Map());
    }
  }

  add(table: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[] = NONE, mins: readonly Value[] = NONE): void {
    if (!this.#byKey.has(table)) throw new Error(`${this.projection.name}: no counter table ${table}`);
    if (this.side === 0) {
      set(this.#before, this.#beforeCount++, table, keys, sums, maxes, mins);
      return;
    }
    if (!this.#unmatched) {
      const i = this.#matched;
      if (i === this.#beforeCount) {
        set(this.#added, this.#addedCount++, table, keys, sums, maxes, mins);
        return;
      }
      const b = this.#before[i] as Emission;
      if (b.table === table && sameValues(b.keys, keys)) {
        set(this.#after, this.#matched++, table, keys, sums, maxes, mins);
        return;
      }
      // Out of step: side 0's rows from here on, and side 1's from this one, meet by key.
      this.#unmatched = true;
      for (let j = i; j < this.#beforeCount; j++) {
        const e = this.#before[j] as Emission;
        const c = this.#change(e.table, e.keys);
        c.before = e.sums;
        c.beforeMaxes = e.maxes;
        c.beforeMins = e.mins;
      }
    }
    const c = this.#change(table, keys);
    c.after = sums;
    c.afterMaxes = maxes;
    c.afterMins = mins;
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
    for (let i = 0; i < this.#matched; i++) {
      const b = this.#before[i] as Emission;
      const a = this.#after[i] as Emission;
      changed(delta, a.table, a.keys, b.sums, a.sums, b.maxes, a.maxes, b.mins, a.mins);
    }
    for (let i = 0; i < this.#addedCount; i++) {
      const a = this.#added[i] as Emission;
      changed(delta, a.table, a.keys, null, a.sums, NONE, a.maxes, NONE, a.mins);
    }
    if (!this.#unmatched) {
      // Side 0's rows side 1 did not reach: retracted.
      for (let i = this.#matched; i < this.#beforeCount; i++) {
        const b = this.#before[i] as Emission;
        changed(delta, b.table, b.keys, b.sums, null, b.maxes, NONE, b.mins, NONE);
      }
    }
    for (const [table, entries] of this.#byKey) {
      if (entries.size === 0) continue;
      for (const c of entries.values()) changed(delta, table, c.keys, c.before, c.after, c.beforeMaxes, c.afterMaxes, c.beforeMins, c.afterMins);
      entries.clear();
    }
    this.#forgetEmissions();
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

  #change(table: string, keys: readonly Value[]): CounterChange {
    const entries = this.#byKey.get(table) as Map<string, CounterChange>;
    const key = keyOf(keys);
    let c = entries.get(key);
    if (c === undefined) {
      c = { keys, before: null, after: null, beforeMaxes: NONE, afterMaxes: NONE, beforeMins: NONE, afterMins: NONE };
      entries.set(key, c);
    }
    return c;
  }

  /** Drops the group's rows (the arrays are the projection's; the slots are kept for the next group). */
  #forgetEmissions(): void {
    release(this.#before, this.#beforeCount);
    release(this.#after, this.#matched);
    release(this.#added, this.#addedCount);
    this.#beforeCount = 0;
    this.#matched = 0;
    this.#addedCount = 0;
    this.#unmatched = false;
  }
}

const NO_SUMS: readonly number[] = [];

/** Lets go of the arrays held by the first `count` slots. */
function release(list: Emission[], count: number): void {
  for (let i = 0; i < count; i++) {
    const e = list[i] as Emission;
    e.keys = NONE;
    e.sums = NO_SUMS;
    e.maxes = NONE;
    e.mins = NONE;
  }
}

/** Stores an emission in slot `i`, reusing the slot's object. */
function set(list: Emission[], i: number, table: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): void {
  const e = list[i];
  if (e === undefined) list.push({ table, keys, sums, maxes, mins });
  else {
    e.table = table;
    e.keys = keys;
    e.sums = sums;
    e.maxes = maxes;
    e.mins = mins;
  }
}

/**
 * One counter row's change (`before` / `after` null: the group did not contribute to it then),
 * added to the delta: `after - before` (with `after`'s bounds) summed into the row's entry, or
 * a new entry made of it.
 */
function changed(
  delta: Delta,
  table: string,
  keys: readonly Value[],
  before: readonly number[] | null,
  after: readonly number[] | null,
  beforeMaxes: readonly Value[],
  afterMaxes: readonly Value[],
  beforeMins: readonly Value[],
  afterMins: readonly Value[],
): void {
  if (after === null) {
    if (before === null || allZero(before)) return;
  } else if (before === null) {
    // A row whose sums are all zero does not exist (a replay never writes one).
    if (allZero(after)) return;
  } else if (sameValues(before, after) && sameValues(beforeMaxes, afterMaxes) && sameValues(beforeMins, afterMins)) {
    return;
  }
  const maxes = after === null ? NONE : afterMaxes;
  const mins = after === null ? NONE : afterMins;
  const out = delta.counters.get(table) as IndexedEntries;
  const entry = out.find(keys);
  if (entry === undefined) {
    const n = after?.length ?? before?.length ?? 0;
    const sums = new Array<number>(n);
    for (let i = 0; i < n; i++) sums[i] = (after?.[i] ?? 0) - (before?.[i] ?? 0);
    out.adopt(keys, { keys, sums, maxes: [...maxes], mins: [...mins] });
    return;
  }
  const sums = entry.sums;
  const n = Math.max(after?.length ?? 0, before?.length ?? 0);
  for (let i = 0; i < n; i++) sums[i] = (sums[i] ?? 0) + (after?.[i] ?? 0) - (before?.[i] ?? 0);
  accumulateBounds(entry, maxes, mins);
}

function allZero(values: readonly number[]): boolean {
  for (const v of values) if (v !== 0) return false;
  return true;
}
