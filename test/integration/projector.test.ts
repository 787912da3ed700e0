import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, bigints, col } from '../../projections/kit/columns.js';
import type { Group, Output, Projection } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { replay } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, tableRows, verifyAgainstReplay } from '../support/projections.js';

/**
 * A probe projection that counts, per message, the `open` events: a message with none adds a
 * row of zeros, which is what a projection does when a message counts nowhere in its table.
 */
const opensProbe: Projection = {
  name: 'probe-opens',
  version: 1,
  groups: ['message'],
  tables: [{ kind: 'counters', name: 'probe_opens', keys: [API_KEY, col('message_id', 'text')], sums: bigints('opens') }],
  project(group: Group, out: Output): void {
    out.add('probe_opens', [group.apiKeyId, group.id], [group.events.filter((e) => e.type === 'open').length]);
  },
};

describe.each(DIALECTS)('projector on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let projector: Projector;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    projector = await startProjector(db, { leaseMs: 60_000 });
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  it('keeps every read model up to date and equal to a replay', async () => {
    await append(db, '1', sampleEvents('100'));
    await append(db, '1', sampleEvents('101', 1_433_340_000));
    await append(db, '2', sampleEvents('100'));
    await caughtUp(db);
    const lifetime = (await tableRows(db, 'statcounters')).filter((r) => r['timing'] === 'L' && r['source_type'] === 'A');
    expect(lifetime.map((r) => [r['api_key_id'], r['total'], r['event_opened']])).toEqual([
      ['1', '2', '2'],
      ['2', '1', '1'],
    ]);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });

  // Regression: a group's first contribution with all-zero sums used to be stored as a row of
  // zeros, which a replay never writes (found through recipient-esp's blocked-only messages).
  it('stores no counter row whose sums are all zero, as a replay does', async () => {
    await ensureProjectionTables(db.kysely, [opensProbe]);
    const probe = await startProjector(db, {}, [opensProbe]);
    try {
      await append(db, '3', [{ event: 'sent', EventID: 'probe-s', time: 1_433_333_949, MessageID: '300', email: 'x@example.org' }]);
      await caughtUp(db, [opensProbe]);
    } finally {
      await probe.stop();
    }
    // tenant 3's only message has no open (tenants 1 and 2 above do have opens)
    expect((await tableRows(db, 'probe_opens')).filter((r) => r['api_key_id'] === '3')).toEqual([]);
    const report = await replay(db, [opensProbe], { readBatch: 1000, catchUpBatch: 1000, mode: 'verify' });
    expect(report.differences).toEqual({ probe_opens: { onlyLive: 0, onlyRebuilt: 0 } });
  });
});
