import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bigints, col } from '../../../projections/kit/columns.js';
import type { Projection, Value } from '../../../projections/kit/types.js';
import { Contribution, type CounterEntry, IndexedEntries } from '../../../src/projector/contribution.js';

/** One counter table: three key columns, two sums, a one-way max and min. */
const PROJECTION: Projection = {
  name: 'contribution-test',
  version: 1,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 't',
      keys: [col('a', 'text'), col('b', 'text'), col('c', 'bigint')],
      sums: bigints('x', 'y'),
      maxes: [col('hi', 'bigint', true)],
      mins: [col('lo', 'bigint', true)],
    },
  ],
  project: () => {},
};

function entriesOf(c: Contribution): Map<string, CounterEntry> {
  return c.counters.get('t') as Map<string, CounterEntry>;
}

/** Entries as plain data: key string → sums, maxes, mins. */
function snapshot(c: Contribution): Record<string, [number[], Value[], Value[]]> {
  return Object.fromEntries([...entriesOf(c)].map(([k, e]) => [k, [e.sums, e.maxes, e.mins]]));
}

describe('a replay total indexed by key values', () => {
  it('uses the index only when asked', () => {
    expect(entriesOf(new Contribution(PROJECTION, true))).toBeInstanceOf(IndexedEntries);
    expect(entriesOf(new Contribution(PROJECTION))).not.toBeInstanceOf(IndexedEntries);
  });

  it('adds up under one entry values that the index tells apart but the key string joins alike', () => {
    const total = new Contribution(PROJECTION, true);
    total.add('t', ['1', 'k', 5], [1, 2], [3], [3]);
    total.add('t', [1, 'k', '5'], [10, 20], [7], [1]);
    total.add('t', ['1', 'k', 5], [100, 200], [4], [2]);
    expect(snapshot(total)).toEqual({ '1\u001fk\u001f5': [[111, 222], [7], [1]] });
  });

  it('takes an entry in as it is, or adds it to the one its key string already has', () => {
    const entries = new IndexedEntries();
    const first = { keys: ['1', 'k', 5], sums: [1, 2], maxes: [3], mins: [3] };
    entries.adopt(first.keys, first);
    expect(entries.find(['1', 'k', 5])).toBe(first);
    // Values the index tells apart, one key string: added to the entry there, then found by these values too.
    entries.adopt([1, 'k', '5'], { keys: [1, 'k', '5'], sums: [10, 20], maxes: [7], mins: [1] });
    expect(entries.size).toBe(1);
    expect(entries.find([1, 'k', '5'])).toBe(first);
    expect(first).toEqual({ keys: ['1', 'k', 5], sums: [11, 22], maxes: [7], mins: [1] });
  });

  it('finds no entry a cleared or changed map no longer holds', () => {
    const total = new Contribution(PROJECTION, true);
    const entries = entriesOf(total);
    total.add('t', ['a', 'b', 1], [1, 1]);
    entries.clear();
    total.add('t', ['a', 'b', 1], [2, 2]);
    expect(snapshot(total)).toEqual({ 'a\u001fb\u001f1': [[2, 2], [], []] });
    entries.delete('a\u001fb\u001f1');
    total.add('t', ['a', 'b', 1], [4, 4]);
    expect(snapshot(total)).toEqual({ 'a\u001fb\u001f1': [[4, 4], [], []] });
    entries.set('a\u001fb\u001f1', { keys: ['a', 'b', 1], sums: [0, 0], maxes: [], mins: [] });
    total.add('t', ['a', 'b', 1], [8, 8]);
    expect(snapshot(total)).toEqual({ 'a\u001fb\u001f1': [[8, 8], [], []] });
  });

  it('holds what a total without the index holds, whatever the adds and the clears in between', () => {
    const value = fc.constantFrom<Value>('1', 1, '2', 2, 'x', 'null', null, '', 0, '0');
    const step = fc.oneof(
      { weight: 12, arbitrary: fc.record({ keys: fc.tuple(value, value, value), sums: fc.tuple(fc.integer({ min: -3, max: 3 }), fc.integer({ min: -3, max: 3 })), hi: fc.integer({ min: 0, max: 9 }), lo: fc.integer({ min: 0, max: 9 }) }) },
      { weight: 1, arbitrary: fc.constant('clear' as const) },
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        const plain = new Contribution(PROJECTION);
        const indexed = new Contribution(PROJECTION, true);
        for (const s of steps) {
          for (const c of [plain, indexed]) {
            if (s === 'clear') entriesOf(c).clear();
            else c.add('t', s.keys, s.sums, [s.hi], [s.lo]);
          }
        }
        expect(snapshot(indexed)).toEqual(snapshot(plain));
      }),
      { numRuns: 300 },
    );
  });
});
