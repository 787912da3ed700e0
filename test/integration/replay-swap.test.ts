import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { readCheckpoint } from '../../src/log/checkpoints.js';
import { logHead } from '../../src/log/read.js';
import { replay, ReplayOvertaken, type ReplayProgress } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * The swap's locks while a reader holds a live table (pg_dump, an analyst's transaction): the
 * swap must not keep the other reads of that table queued behind its ACCESS EXCLUSIVE request
 * for as long as the reader lasts. It steps back, lets them through and tries again.
 */

/** Longest the test waits for a read the swap should let through (several of its lock timeouts). */
const READ_CAP_MS = 20_000;

/** A request for an ACCESS EXCLUSIVE lock on `table` that has not been granted: the swap is trying. */
async function swapWaiting(db: Db, table: string): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock' AND relation = ${table}::regclass`.execute(db.kysely);
  return (rows[0]?.n ?? 0) > 0;
}

async function shadowTables(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relkind = 'r' AND relname LIKE '%\_\_shadow' ORDER BY 1`.execute(db.kysely);
  return rows.map((r) => r.name);
}

describe('the replay swap beside a long reader of a live table (Postgres)', () => {
  let db: Db;
  let url: string;
  let cleanup: () => Promise<void>;
  let projector: Projector;
  const clients: pg.Client[] = [];
  let batch = 0;

  const client = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    clients.push(c);
    return c;
  };
  /** A connection in a transaction that has read geo_stats (and holds it), and its backend's pid. */
  const blocker = async (): Promise<{ client: pg.Client; pid: number }> => {
    const c = await client();
    await c.query('BEGIN');
    await c.query('SELECT count(*) FROM geo_stats');
    const { rows } = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return { client: c, pid: rows[0]?.pid ?? -1 };
  };
  const appendMessages = async (n: number): Promise<void> => {
    for (let m = 0; m < n; m++, batch++) await append(db, String(1 + (batch % 2)), sampleEvents(String(8000 + batch), 1_433_333_949 + batch * 977));
  };

  beforeAll(async () => {
    const opened = await openMigratedDb('postgres');
    ({ db, cleanup } = opened);
    url = opened.url as string;
    projector = await startProjector(db);
    await appendMessages(20);
    await caughtUp(db);
  });
  afterAll(async () => {
    for (const c of clients) await c.end().catch(() => {});
    await projector.stop();
    await cleanup();
  });

  it('lets a plain read of the table through while the reader holds it, catches up meanwhile, and swaps in once it lets go', async () => {
    const holder = await blocker();
    const reader = await client();
    const waits: ReplayProgress[] = [];
    const before = await logHead(db.kysely);
    const replaying = replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 5, onProgress: (p) => p.phase === 'wait' && waits.push(p) });
    replaying.catch(() => {});
    let answered: boolean;
    try {
      await waitFor('the swap to ask for its locks', () => swapWaiting(db, 'geo_stats'), 60_000, 10);
      answered = await Promise.race([reader.query('SELECT count(*) FROM geo_stats').then(() => true), sleep(READ_CAP_MS).then(() => false)]);
      if (answered) {
        // Appended while it waits: caught up with between its tries.
        await appendMessages(5);
        const tries = waits.length;
        await waitFor('a try after the appends', async () => waits.length > tries, 30_000);
      }
    } finally {
      await holder.client.query('COMMIT');
      await replaying.catch(() => {});
    }
    expect(answered, 'a read of geo_stats answered while the blocker still held it').toBe(true);
    const report = await replaying;
    expect(report.position).toBeGreaterThan(before);
    expect(waits[0]?.waitingFor).toContain(`geo_stats, held by pid ${holder.pid}`);
    expect(await shadowTables(db)).toEqual([]);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);

  it('gives up after its wait, naming the table and the pid that holds it; the live tables stay as they were', async () => {
    const holder = await blocker();
    const geo = PROJECTIONS.filter((p) => p.name === 'geo');
    const replaying = replay(db, geo, { readBatch: 1000, catchUpBatch: 100, swapLockTimeoutMs: 300, swapWaitMs: 3000 });
    let outcome: unknown;
    try {
      outcome = await Promise.race([replaying.then(() => 'swapped in', (err: unknown) => err), sleep(30_000).then(() => 'still waiting')]);
    } finally {
      await holder.client.query('COMMIT');
      await replaying.catch(() => {});
    }
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toMatch(/^Could not swap the rebuilt read models of geo in within 3 s/);
    expect((outcome as Error).message).toContain(`geo_stats, held by pid ${holder.pid}`);
    expect(await shadowTables(db)).toEqual([]);
    // The live projector kept the live tables.
    await appendMessages(3);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);

  it('never swaps a read model in behind where the live projector has brought it', async () => {
    const holder = await blocker();
    const geo = PROJECTIONS.filter((p) => p.name === 'geo');
    // A catch-up step of 1,000: the few events appended while the swap waits are left to the live projector.
    const replaying = replay(db, geo, { readBatch: 1000, catchUpBatch: 1000, swapLockTimeoutMs: 300, swapWaitMs: 60_000 });
    replaying.catch(() => {});
    let live: bigint;
    try {
      await waitFor('the swap to ask for its locks', () => swapWaiting(db, 'geo_stats'), 60_000, 10);
      await appendMessages(3);
      await caughtUp(db, geo);
      live = await readCheckpoint(db.kysely, 'geo');
    } finally {
      await holder.client.query('COMMIT');
    }
    const report = await replaying;
    expect(report.position).toBeGreaterThanOrEqual(live);
    expect(await readCheckpoint(db.kysely, 'geo')).toBeGreaterThanOrEqual(live);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);

  it('stops, touching no table, once another replay took its leases over while it stood still', async () => {
    const holder = await blocker();
    const geo = PROJECTIONS.filter((p) => p.name === 'geo');
    const replaying = replay(db, geo, { readBatch: 1000, catchUpBatch: 100, swapLockTimeoutMs: 300, swapWaitMs: 60_000 });
    let outcome: unknown;
    try {
      await waitFor('the swap to ask for its locks', () => swapWaiting(db, 'geo_stats'), 60_000, 10);
      // What a second replay does when this one's lease ran out while it stood still (stopped,
      // its machine frozen): takes the lease, and builds its own shadow tables.
      await sql`UPDATE leases SET owner = 'replay-other', expires_at = now() + interval '60 seconds' WHERE name = 'replay:geo'`.execute(db.kysely);
      await holder.client.query('COMMIT');
      outcome = await Promise.race([replaying.then(() => 'swapped in', (err: unknown) => err), sleep(30_000).then(() => 'still running')]);
    } finally {
      await holder.client.query('ROLLBACK').catch(() => {});
      await replaying.catch(() => {});
    }
    try {
      expect(outcome).toBeInstanceOf(ReplayOvertaken);
      // The other replay's tables, not dropped; the live ones not swapped.
      expect(await shadowTables(db)).toEqual(['geo_stats__shadow']);
    } finally {
      await sql`DROP TABLE IF EXISTS geo_stats__shadow`.execute(db.kysely);
      await sql`DELETE FROM leases WHERE name = 'replay:geo'`.execute(db.kysely);
    }
    await appendMessages(2);
    await caughtUp(db);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);

  it.each(['sql', 'fold'] as const)('commits no build step that ends after another replay took its leases over (%s)', async (engine) => {
    const geo = PROJECTIONS.filter((p) => p.name === 'geo');
    // The log held still, so the replay waits in its first read, its lease taken.
    const log = await client();
    await log.query('BEGIN');
    await log.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    const replaying = replay(db, geo, { readBatch: 1000, catchUpBatch: 100, engine });
    replaying.catch(() => {});
    const lease = await client();
    let outcome: unknown;
    try {
      await waitFor('the replay to take its lease', async () => {
        const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM leases WHERE name = 'replay:geo' AND owner LIKE 'replay-%'`.execute(db.kysely);
        return rows[0]?.n === 1;
      }, 30_000, 10);
      // Its lease row held, so the first build step to end waits on it, then the log let go.
      await lease.query('BEGIN');
      await lease.query(`SELECT 1 FROM leases WHERE name = 'replay:geo' FOR UPDATE`);
      await log.query('COMMIT');
      await waitFor('a build step to wait on the lease', async () => {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INTO leases%'`.execute(db.kysely);
        return (rows[0]?.n ?? 0) > 0;
      }, 30_000, 10);
      // Meanwhile, as if this replay had stood still past its lease, another replay takes it.
      await lease.query(`UPDATE leases SET owner = 'replay-other', expires_at = now() + interval '60 seconds' WHERE name = 'replay:geo'`);
      await lease.query('COMMIT');
      outcome = await Promise.race([replaying.then(() => 'swapped in', (err: unknown) => err), sleep(30_000).then(() => 'still running')]);
    } finally {
      await log.query('ROLLBACK').catch(() => {});
      await lease.query('ROLLBACK').catch(() => {});
      await replaying.catch(() => {});
    }
    try {
      expect(outcome).toBeInstanceOf(ReplayOvertaken);
      // Left for the other replay, with nothing of this one's in it.
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM geo_stats__shadow`.execute(db.kysely);
      expect(rows[0]?.n).toBe(0);
    } finally {
      await sql`DROP TABLE IF EXISTS geo_stats__shadow`.execute(db.kysely);
      await sql`DELETE FROM leases WHERE name = 'replay:geo'`.execute(db.kysely);
    }
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 120_000);
});
