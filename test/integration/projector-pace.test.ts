import { describe, expect, it } from 'vitest';
import { readModelDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * PROJECTOR_MIN_INTERVAL_MS (`minIntervalMs`): a live batch that follows a partial one starts no
 * sooner than the interval after it (batch-pace.ts), while a backlog's full batches follow one
 * another at once; the numbers are the same either way.
 */
describe('live batches spaced by minIntervalMs', () => {
  const dbOf = readModelDb('postgres');
  const INTERVAL = 500;

  it('holds a batch after a partial one for the interval, not a backlog, and folds the same numbers', async () => {
    const db = dbOf();
    const projector = await startProjector(db, { minIntervalMs: INTERVAL, batchSize: 20 });
    try {
      // A live event, then another at once: the second batch cannot begin before the first
      // began plus the interval, and the first began after `t0`.
      const t0 = performance.now();
      await append(db, '1', sampleEvents('9001', 1_700_000_000).slice(0, 1));
      await waitFor('the first batch', async () => projector.stats.batches >= 1, 10_000, 5);
      await append(db, '1', sampleEvents('9002', 1_700_000_100).slice(0, 1));
      await waitFor('the second batch', async () => projector.stats.batches >= 2, 10_000, 5);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(INTERVAL);

      // A backlog: 100 events in batches of 20 (five full ones, then what is left). Spaced out,
      // they would take at least 4 × 500 ms; full batches are not spaced.
      await new Promise((r) => setTimeout(r, INTERVAL));
      const before = projector.stats.batches;
      const eventsBefore = projector.stats.events;
      const backlog = Array.from({ length: 25 }, (_, i) => sampleEvents(String(9100 + i), 1_700_001_000 + i).slice(0, 4)).flat();
      expect(backlog).toHaveLength(100);
      const t1 = performance.now();
      await append(db, '1', backlog);
      // The runner counts a batch once its write has committed: the checkpoints in the database
      // can show the end before the count does, so the wait is on the runner's own count.
      await waitFor('the backlog', async () => projector.stats.events - eventsBefore >= backlog.length, 10_000, 5);
      await caughtUp(db);
      expect(projector.stats.batches - before).toBeGreaterThanOrEqual(5);
      expect(performance.now() - t1).toBeLessThan(2 * INTERVAL);
    } finally {
      await projector.stop();
    }
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});
