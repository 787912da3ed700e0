import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../../projections/index.js';
import type { Group, LogEvent, Output, Projection, Value } from '../../../projections/kit/types.js';
import { groupOf } from '../../../src/projector/batch.js';
import { Contribution, type CounterEntry, Delta, keyOf, pick, sameValues } from '../../../src/projector/contribution.js';
import { GroupDiff } from '../../../src/projector/group-diff.js';
import { byTimeThenId, type GroupKey, groupKeyOf, groupKeyString } from '../../../src/projector/read-groups.js';
import { MemoryLog } from '../../support/projections.js';
import { eventSetArb, type TenantEvent } from '../projections/arbitraries.js';

/**
 * The live projector's difference of a group before and after a batch (`GroupDiff`, which
 * matches counter rows by position while the two sides agree) against the plain definition: each
 * side's rows gathered by key, compared key by key, and added up over the batch's groups.
 */

/** The groups of a random event set, each with its events in log order. */
function groupsOf(events: readonly TenantEvent[]): { key: GroupKey; events: LogEvent[] }[] {
  const log = new MemoryLog();
  for (const e of events) log.append(String(100 + e.tenant), [e.event]);
  const groups = new Map<string, { key: GroupKey; events: LogEvent[] }>();
  for (const e of log.events) {
    const key = groupKeyOf(e);
    const id = groupKeyString(key);
    let g = groups.get(id);
    if (g === undefined) groups.set(id, (g = { key, events: [] }));
    g.events.push(e);
  }
  return [...groups.values()];
}

const sorted = (events: readonly LogEvent[]): LogEvent[] => [...events].sort(byTimeThenId);

/** What the batch changes: each group's events up to its cut (by position) before, all of them after. */
interface Change {
  before: Group | null;
  after: Group;
}

function changesOf(groups: readonly { key: GroupKey; events: LogEvent[] }[], cuts: readonly number[]): Change[] {
  return groups.map((g, i) => {
    const cut = (cuts[i % Math.max(1, cuts.length)] ?? 0) % g.events.length;
    return { before: cut === 0 ? null : groupOf(g.key, sorted(g.events.slice(0, cut))), after: groupOf(g.key, sorted(g.events)) };
  });
}

type Entries = Record<string, { sums: number[]; maxes: Value[]; mins: Value[] }>;

interface Expected {
  counters: Record<string, Entries>;
  upserts: Record<string, Record<string, readonly Value[]>>;
  deletes: Record<string, string[]>;
}

function mergeInto(out: Entries, key: string, sums: readonly number[], maxes: readonly Value[], mins: readonly Value[]): void {
  const e = out[key];
  if (e === undefined) {
    out[key] = { sums: [...sums], maxes: [...maxes], mins: [...mins] };
    return;
  }
  sums.forEach((v, i) => (e.sums[i] = (e.sums[i] ?? 0) + v));
  maxes.forEach((v, i) => (e.maxes[i] = pick(e.maxes[i] ?? null, v, 1)));
  mins.forEach((v, i) => (e.mins[i] = pick(e.mins[i] ?? null, v, -1)));
}

/** The definition, key by key. */
function expectedDelta(projection: Projection, changes: readonly Change[]): Expected {
  const out: Expected = { counters: {}, upserts: {}, deletes: {} };
  for (const t of projection.tables) {
    if (t.kind === 'counters') out.counters[t.name] = {};
    else {
      out.upserts[t.name] = {};
      out.deletes[t.name] = [];
    }
  }
  for (const { before, after } of changes) {
    if (!projection.groups.includes(after.kind)) continue;
    const b = new Contribution(projection);
    const a = new Contribution(projection);
    if (before !== null) projection.project(before, b);
    projection.project(after, a);
    for (const [table, afterEntries] of a.counters) {
      const beforeEntries = b.counters.get(table) as Map<string, CounterEntry>;
      const target = out.counters[table] as Entries;
      const keys = new Set([...beforeEntries.keys(), ...afterEntries.keys()]);
      for (const key of keys) {
        const x = beforeEntries.get(key);
        const y = afterEntries.get(key);
        if (y === undefined) {
          if (x !== undefined && x.sums.some((v) => v !== 0)) mergeInto(target, key, x.sums.map((v) => 0 - v), [], []);
        } else if (x === undefined) {
          if (y.sums.some((v) => v !== 0)) mergeInto(target, key, y.sums, y.maxes, y.mins);
        } else {
          const diff = y.sums.map((v, i) => v - (x.sums[i] ?? 0));
          if (diff.every((v) => v === 0) && sameValues(x.maxes, y.maxes) && sameValues(x.mins, y.mins)) continue;
          mergeInto(target, key, diff, y.maxes, y.mins);
        }
      }
    }
    for (const [table, afterRows] of a.rows) {
      const beforeRows = b.rows.get(table) ?? new Map();
      for (const [key, r] of afterRows) {
        const x = beforeRows.get(key);
        if (x === undefined || !sameValues(x.columns, r.columns)) (out.upserts[table] as Record<string, readonly Value[]>)[key] = r.columns;
      }
      for (const key of beforeRows.keys()) if (!afterRows.has(key)) out.deletes[table]?.push(key);
    }
  }
  for (const list of Object.values(out.deletes)) list.sort();
  return out;
}

function actualDelta(projection: Projection, changes: readonly Change[]): Expected {
  const delta = new Delta(projection);
  const diff = new GroupDiff(projection);
  for (const { before, after } of changes) {
    if (!projection.groups.includes(after.kind)) continue;
    if (before !== null) {
      diff.side = 0;
      projection.project(before, diff);
    }
    diff.side = 1;
    projection.project(after, diff);
    diff.flushInto(delta);
  }
  const out: Expected = { counters: {}, upserts: {}, deletes: {} };
  for (const [table, entries] of delta.counters) {
    out.counters[table] = Object.fromEntries([...entries].map(([k, e]) => [k, { sums: [...e.sums], maxes: [...e.maxes], mins: [...e.mins] }]));
  }
  for (const [table, rows] of delta.upserts) out.upserts[table] = Object.fromEntries([...rows].map(([k, r]) => [k, r.columns]));
  for (const [table, keys] of delta.deletes) out.deletes[table] = [...keys.keys()].sort();
  return out;
}

describe('a group’s change over a batch', () => {
  it('is, for every projection, the difference of its rows before and after, added up over the groups', () => {
    fc.assert(
      fc.property(eventSetArb, fc.array(fc.nat(), { minLength: 1, maxLength: 40 }), (events, cuts) => {
        const changes = changesOf(groupsOf(events), cuts);
        for (const p of PROJECTIONS) expect(actualDelta(p, changes), p.name).toEqual(expectedDelta(p, changes));
      }),
      { numRuns: 150 },
    );
  });

  it('matches rows by key once the two sides are out of step, and retracts what the group no longer has', () => {
    const projection: Projection = {
      name: 'diff-test',
      version: 1,
      groups: ['message'],
      tables: [{ kind: 'counters', name: 't', keys: [], sums: [] }],
      project: () => {},
    };
    const sides: [string, number][][] = [
      [
        ['a', 1],
        ['b', 2],
        ['c', 3],
        ['d', 4],
      ],
      [
        ['a', 1],
        ['c', 5],
        ['b', 2],
        ['e', 6],
      ],
    ];
    const diff = new GroupDiff(projection);
    const delta = new Delta(projection);
    sides.forEach((rows, side) => {
      diff.side = side as 0 | 1;
      for (const [k, n] of rows) diff.add('t', [k], [n]);
    });
    diff.flushInto(delta);
    const got = Object.fromEntries([...(delta.counters.get('t') ?? [])].map(([k, e]) => [k, e.sums]));
    expect(got).toEqual({ c: [2], d: [-4], e: [6] });
    // The instance is reused: the next group starts from nothing. Here side 1 stops early, in step.
    diff.side = 0;
    diff.add('t', ['a'], [7]);
    diff.add('t', ['f'], [8]);
    diff.side = 1;
    diff.add('t', ['a'], [9]);
    diff.flushInto(delta);
    expect(delta.counters.get('t')?.get('a')?.sums).toEqual([2]);
    expect(delta.counters.get('t')?.get('f')?.sums).toEqual([-8]);
  });
});

describe('every projection', () => {
  it('emits each key of a table at most once for a group (GroupDiff relies on it)', () => {
    fc.assert(
      fc.property(eventSetArb, (events) => {
        for (const g of groupsOf(events)) {
          const all = sorted(g.events);
          for (let n = 1; n <= all.length; n++) {
            const group = groupOf(g.key, all.slice(0, n));
            for (const p of PROJECTIONS) {
              if (!p.groups.includes(group.kind)) continue;
              const seen = new Set<string>();
              const twice: string[] = [];
              const note = (table: string, keys: readonly Value[]) => {
                const id = `${table} ${keyOf(keys)}`;
                if (seen.has(id)) twice.push(id);
                seen.add(id);
              };
              const out: Output = { add: note, row: note };
              p.project(group, out);
              expect(twice, p.name).toEqual([]);
            }
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
