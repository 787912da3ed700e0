import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { readCheckpoint } from '../../src/log/checkpoints.js';
import { logHead } from '../../src/log/read.js';
import { replay } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { SHADOW } from '../../src/projector/tables.js';
import { openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { capturingLogger, waitFor } from '../support/harness.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * A replay swaps its tables in at the position its catch-up reached, which can be behind a live
 * runner that applied the last appends meanwhile: the runner, its log quiet, finds its
 * checkpoints moved back. That is the replay's doing, not a crash's, and is logged as such.
 * Postgres: a second connection holds the replay (a lock on one of its shadow tables) after it
 * read the head, while events are appended and the runner applies them.
 */
const NAMES = PROJECTIONS.map((p) => p.name);
const LOCKED = `${PROJECTIONS[0]?.tables[0]?.name}${SHADOW}`;

describe('projector after a replay swapped its read models (Postgres)', () => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  let projector: Projector;
  const logged = capturingLogger();

  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb('postgres'));
    projector = await startProjector(db, { leaseMs: 60_000, pollMs: 50, batchSize: 7 }, PROJECTIONS, logged.log);
    for (let m = 0; m < 6; m++) await append(db, '7', sampleEvents(String(60_000 + m), 1_433_333_949 + m * 61));
    await caughtUp(db);
  });
  afterAll(async () => {
    await projector.stop();
    await cleanup();
  });

  it('logs the rebuild at info and folds on from the replay’s position, with no crash warning', async () => {
    const from = await logHead(db.kysely);
    await sql.raw(`CREATE TABLE ${LOCKED} (n int)`).execute(db.kysely);
    const other = new pg.Client({ connectionString: url as string });
    await other.connect();
    let replaying: Promise<unknown> = Promise.resolve();
    try {
      await other.query('BEGIN');
      await other.query(`LOCK TABLE ${LOCKED} IN ACCESS EXCLUSIVE MODE`);
      // The replay reads the head, then waits to drop the locked table.
      replaying = replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
      await waitFor('the replay to wait for the lock', async () => {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${`DROP TABLE IF EXISTS ${LOCKED}%`}`.execute(db.kysely);
        return rows[0]?.n === 1;
      });
      // Fewer positions than its catch-up's batch: it swaps in at `from`, behind the runner.
      for (let m = 0; m < 3; m++) await append(db, '7', sampleEvents(String(60_100 + m), 1_433_343_949 + m * 61));
      await caughtUp(db);
      await other.query('COMMIT');
      await replaying;
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      await other.end();
      await replaying.catch(() => {});
    }

    const rebuilt = (l: Record<string, unknown>) => String(l['msg']).includes('was rebuilt by a replay');
    const crash = (l: Record<string, unknown>) => String(l['msg']).includes('a database crash took back');
    // One check of the checkpoints finds them all moved, and logs at once.
    await waitFor('the runner to find its checkpoints moved', async () => logged.lines().some((l) => rebuilt(l) || crash(l)));
    const lines = logged.lines();
    expect(lines.filter(crash)).toEqual([]);
    expect(lines.filter(rebuilt).map((l) => [l['level'], l['msg']]).sort()).toEqual(NAMES.map((n) => [30, `read model ${n} was rebuilt by a replay; continuing from position ${from}`]).sort());

    await caughtUp(db);
    expect(await readCheckpoint(db.kysely, NAMES[0] as string)).toBe(await logHead(db.kysely));
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});
