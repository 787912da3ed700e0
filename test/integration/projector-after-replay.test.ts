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
 * A replay's catch-up leaves the last few appends to a live runner, which applies them to the
 * live tables meanwhile: on Postgres the swap then brings the shadow tables to the runner's
 * position before it swaps them in, so no read model goes back, and the runner folds on from
 * where it was (a swap that lands elsewhere, on the embedded database, is logged by the runner as
 * a rebuild, not a crash). A second connection holds the replay (a lock on one of its shadow
 * tables) after it read the head, while events are appended and the runner applies them.
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

  it('swaps in where the runner is, not behind it, and the runner folds on with no crash warning', async () => {
    const from = await logHead(db.kysely);
    await sql.raw(`CREATE TABLE ${LOCKED} (n int)`).execute(db.kysely);
    const other = new pg.Client({ connectionString: url as string });
    await other.connect();
    let replaying: Promise<unknown> = Promise.resolve();
    let live = 0n;
    let report: { position: bigint } = { position: 0n };
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
      // Fewer positions than its catch-up's batch: left to the runner, which applies them; the
      // swap then brings the shadow tables to where the runner is before it swaps them in.
      for (let m = 0; m < 3; m++) await append(db, '7', sampleEvents(String(60_100 + m), 1_433_343_949 + m * 61));
      await caughtUp(db);
      live = await logHead(db.kysely);
      await other.query('COMMIT');
      report = (await replaying) as { position: bigint };
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      await other.end();
      await replaying.catch(() => {});
    }

    expect(report.position).toBe(live);
    expect(live).toBeGreaterThan(from);
    // The runner's next batch finds its checkpoint where it left it: no crash warning.
    for (let m = 0; m < 2; m++) await append(db, '7', sampleEvents(String(60_200 + m), 1_433_353_949 + m * 61));
    const crash = (l: Record<string, unknown>) => String(l['msg']).includes('a database crash took back');
    await caughtUp(db);
    expect(logged.lines().filter(crash)).toEqual([]);
    expect(await readCheckpoint(db.kysely, NAMES[0] as string)).toBe(await logHead(db.kysely));
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  });
});
