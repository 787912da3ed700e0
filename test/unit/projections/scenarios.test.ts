import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../../projections/index.js';
import { compareRows, MemoryLog } from '../../support/projections.js';
import { SCENARIOS } from './scenarios/index.js';

/** Every scenario as a pure fold: each projection's `project` over the groups of an in-memory log. */
describe('read-model scenarios, folded in memory', () => {
  for (const scenario of SCENARIOS) {
    it(scenario.name, () => {
      const log = new MemoryLog();
      scenario.steps.forEach((step, i) => {
        log.append(scenario.tenant, step.append);
        const tables = log.tables();
        for (const then of step.then) {
          const { actual, expected } = compareRows(scenario.tenant, then, tables.get(then.table) ?? [], (id) => log.position(id));
          expect(actual, `step ${i + 1}: ${then.table} ${JSON.stringify(then.where ?? {})}`).toEqual(expected);
        }
      });
    });
  }

  it('covers every table of every projection with a non-empty expectation', () => {
    const covered = new Set(SCENARIOS.flatMap((s) => s.steps.flatMap((st) => st.then.filter((t) => t.rows.length > 0).map((t) => t.table))));
    const tables = PROJECTIONS.flatMap((p) => p.tables.map((t) => t.name));
    expect(tables.filter((t) => !covered.has(t))).toEqual([]);
  });
});
