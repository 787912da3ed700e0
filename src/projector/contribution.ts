import { compareText } from '../../projections/kit/text-order.js';
import type { Output, Projection, Value } from '../../projections/kit/types.js';

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

/** Orders values of one column: numbers, decimal-string ids (by magnitude), text (by code point). Null is "none". */
export function compareValues(a: Value, b: Value): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const sa = String(a);
  const sb = String(b);
  if (/^\d+$/.test(sa) && /^\d+$/.test(sb) && sa.length !== sb.length) return sa.length - sb.length;
  return compareText(sa, sb);
}

export function pick(current: Value, offered: Value, want: 1 | -1): Value {
  if (offered === null) return current;
  if (current === null) return offered;
  return compareValues(offered, current) * want > 0 ? offered : current;
}

/**
 * Everything one projection emits for a set of groups, merged by key: counter rows add up,
 * row-table rows are collected. Used for a single group (so the projector can compare a
 * group's contribution before and after a batch) and, `indexed`, for a whole replay, whose
 * totals take many contributions per row (see `IndexedEntries`).
 */
export class Contribution implements Output {
  readonly counters = new Map<string, Map<string, CounterEntry>>();
  readonly rows = new Map<string, Map<string, RowEntry>>();

  constructor(
    readonly projection: Projection,
    indexed = false,
  ) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.counters.set(t.name, indexed ? new IndexedEntries() : new Map());
      else this.rows.set(t.name, new Map());
    }
  }

  add(table: string, keys: readonly Value[], sums: readonly number[], maxes: readonly Value[] = [], mins: readonly Value[] = []): void {
    const entries = this.counters.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no counter table ${table}`);
    if (!(entries instanceof IndexedEntries)) return addTo(entries, keyOf(keys), keys, sums, maxes, mins);
    const entry = entries.find(keys);
    if (entry === undefined) entries.add(keys, sums, maxes, mins);
    else accumulate(entry, sums, maxes, mins);
  }

  row(table: string, keys: readonly Value[], columns: readonly Value[]): void {
    const entries = this.rows.get(table);
    if (entries === undefined) throw new Error(`${this.projection.name}: no row table ${table}`);
    entries.set(keyOf(keys), { keys, columns });
  }
}

/** Changes to apply to one projection's tables. */
export class Delta {
  /** Indexed: a batch's groups add to the same rows (a tenant's and a campaign's counters) again and again. */
  readonly counters = new Map<string, IndexedEntries>();
  readonly deletes = new Map<string, Map<string, readonly Value[]>>();
  readonly upserts = new Map<string, Map<string, RowEntry>>();

  constructor(readonly projection: Projection) {
    for (const t of projection.tables) {
      if (t.kind === 'counters') this.counters.set(t.name, new IndexedEntries());
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
  if (entry === undefined) out.set(key, newEntry(keys, sums, maxes, mins));
  else accumulate(entry, sums, maxes, mins);
}

function newEntry(keys: readonly Value[], sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): CounterEntry {
  return { keys, sums: [...sums], maxes: [...maxes], mins: [...mins] };
}

function accumulate(entry: CounterEntry, sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): void {
  for (let i = 0; i < sums.length; i++) entry.sums[i] = (entry.sums[i] ?? 0) + (sums[i] ?? 0);
  accumulateBounds(entry, maxes, mins);
}

/** Moves an entry's one-way columns: each max up to `maxes`', each min down to `mins`'. */
export function accumulateBounds(entry: CounterEntry, maxes: readonly Value[], mins: readonly Value[]): void {
  for (let i = 0; i < maxes.length; i++) entry.maxes[i] = pick(entry.maxes[i] ?? null, maxes[i] ?? null, 1);
  for (let i = 0; i < mins.length; i++) entry.mins[i] = pick(entry.mins[i] ?? null, mins[i] ?? null, -1);
}

type Node = Map<Value | undefined, unknown>;

/**
 * A counter table's entries by key string, as every writer reads them, with an index by key
 * values for lookups: a tree of small maps, one level per key column, whose keys (the log
 * reader's interned ids, literals, numbers) are hashed once each rather than a key string built
 * and hashed for every contribution. A replay's totals take most of their contributions this
 * way (`statcounters` alone gets some 25 per message, into a few thousand rows), and so does a
 * live batch's delta (`Delta`, `group-diff.ts`), to which most groups add a tenant's and a
 * campaign's counters.
 *
 * The string map stays the truth and the index only a shortcut to its entries: a lookup the
 * index misses goes through `keyOf`, so values the index tells apart but `keyOf` joins alike
 * (1 and '1') still meet in one entry; and a change made other than by `add` or `adopt` drops
 * the index, which they build again as entries are met.
 */
export class IndexedEntries extends Map<string, CounterEntry> {
  #root: Node = new Map();

  /** The entry under these key values, if the index has it. */
  find(keys: readonly Value[]): CounterEntry | undefined {
    let node: Node | undefined = this.#root;
    const last = keys.length - 1;
    for (let i = 0; i < last; i++) {
      node = node.get(keys[i]) as Node | undefined;
      if (node === undefined) return undefined;
    }
    return node.get(keys[last]) as CounterEntry | undefined;
  }

  /** Adds to the entry of `keys` (created if new) and indexes it under these values. */
  add(keys: readonly Value[], sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): void {
    const key = keyOf(keys);
    let entry = super.get(key);
    if (entry === undefined) super.set(key, (entry = newEntry(keys, sums, maxes, mins)));
    else accumulate(entry, sums, maxes, mins);
    this.#index(keys, entry);
  }

  /**
   * For `keys`, which `find` did not find: puts `entry` in as it is (its arrays become the
   * map's), or, if its key string has an entry already, adds to that one. Indexes it either way.
   */
  adopt(keys: readonly Value[], entry: CounterEntry): void {
    const key = keyOf(keys);
    let target = super.get(key);
    if (target === undefined) super.set(key, (target = entry));
    else accumulate(target, entry.sums, entry.maxes, entry.mins);
    this.#index(keys, target);
  }

  /** Files `entry` in the index under these key values. */
  #index(keys: readonly Value[], entry: CounterEntry): void {
    let node = this.#root;
    const last = keys.length - 1;
    for (let i = 0; i < last; i++) {
      let next = node.get(keys[i]) as Node | undefined;
      if (next === undefined) node.set(keys[i], (next = new Map()));
      node = next;
    }
    node.set(keys[last], entry);
  }

  override set(key: string, entry: CounterEntry): this {
    this.#root = new Map();
    return super.set(key, entry);
  }

  override delete(key: string): boolean {
    this.#root = new Map();
    return super.delete(key);
  }

  override clear(): void {
    this.#root = new Map();
    super.clear();
  }
}

export function sameValues(a: readonly Value[], b: readonly Value[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
