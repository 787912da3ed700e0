import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import type { Projector } from '../../src/projector/runner.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { append, caughtUp, startProjector } from '../support/projections.js';

/**
 * Catching up on a backlog, the projector leaves the event loop to others between batches: on
 * the embedded database every statement runs on this thread and settles without a turn, so a
 * drain that never waited for one kept timers (lease renewals, signals) and HTTP requests out
 * until the whole backlog was folded — the embedded service did not even listen meanwhile.
 */
describe.each(DIALECTS)('projector on %s, catching up', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let projector: Projector | null = null;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    const events = Array.from({ length: 300 }, (_, i) => sampleEvents(String(1000 + i), 1_433_333_949 + i * 60)).flat();
    await append(db, '1', events);
  });
  afterAll(async () => {
    await projector?.stop();
    await cleanup();
  });

  it('lets timers run while the backlog is being folded', async () => {
    // What the projector had folded each time a 5 ms timer got to run.
    const seen: number[] = [];
    projector = await startProjector(db, { batchSize: 100, leaseMs: 60_000 });
    const running = projector;
    const timer = setInterval(() => seen.push(running.stats.events), 5);
    try {
      await caughtUp(db, undefined, 120_000);
    } finally {
      clearInterval(timer);
    }
    const total = running.stats.events;
    expect(total).toBeGreaterThan(1000);
    // Timers ran in the middle of the backlog, not only before and after it.
    expect(seen.filter((n) => n > 0 && n < total).length).toBeGreaterThan(3);
  });
});
