import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { PROJECTIONS } from '../../projections/index.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { runCli, spawnCli, stopAll } from '../support/processes.js';
import { append, NO_DIFFERENCES, verifyAgainstReplay } from '../support/projections.js';

/**
 * Ctrl-C during `mailtally replay`: the run stops after the statement in progress, leaves the
 * live tables as they were, drops its work tables and lets go of its read models, so running it
 * again at once rebuilds them.
 */

let db: Db;
let url: string;
let env: Record<string, string>;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let opened: string | null;
  ({ db, url: opened, cleanup } = await openMigratedDb('postgres'));
  url = opened as string;
  env = { DATABASE_URL: url, LOG_LEVEL: 'warn' };
  await ensureProjectionTables(db.kysely, PROJECTIONS);
  // 3,000 messages of ten events: a rebuild long enough to be interrupted in the middle.
  for (let m = 0; m < 3000; m += 100) {
    const events = Array.from({ length: 100 }, (_, i) => sampleEvents(String(900_000 + m + i), 1_433_333_949 + (m + i) * 61)).flat();
    await append(db, String(31 + (m % 3)), events);
  }
}, 120_000);
afterAll(async () => {
  await stopAll();
  await cleanup();
});

describe('mailtally replay, interrupted', () => {
  // SIGTERM: what a supervisor, `timeout` or a cancelled CI run sends.
  it.each(['SIGINT', 'SIGTERM'] as const)('stops at %s as at Ctrl-C, keeps nothing of the run, and can run again at once', async (signal) => {
    const statcountersBefore = await sql<{ n: number }>`SELECT count(*)::int AS n FROM statcounters`.execute(db.kysely);
    const run = spawnCli(['replay'], { env });
    await run.waitFor('the rebuild to start building tables', () => (run.stderr.includes('replay: building tables') ? true : undefined), 60_000);
    run.signal(signal);
    const exit = await run.waitForExit(60_000);
    expect(exit.code, run.describe()).toBe(130);
    expect(run.stderr).toContain('Interrupted: the live tables are untouched');
    expect(run.stdout).not.toContain('"projections"');

    // Nothing held, nothing left of the run, the live tables as they were.
    const { rows: leases } = await sql<{ name: string }>`SELECT name FROM leases WHERE name LIKE 'replay%'`.execute(db.kysely);
    expect(leases).toEqual([]);
    const { rows: left } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class WHERE relname ~ '^replay_(facts|engagement)_'`.execute(db.kysely);
    expect(left).toEqual([]);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM statcounters`.execute(db.kysely)).rows).toEqual(statcountersBefore.rows);

    const again = await runCli(['replay'], { env, timeoutMs: 120_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout.trim().split('\n').at(-1) ?? 'null')).toMatchObject({ events: 30_000 });
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
  }, 240_000);

  it('says the database connection broke, and that running it again is safe, when its connections are ended on the server', async () => {
    const run = spawnCli(['replay'], { env });
    await run.waitFor('the rebuild to start building tables', () => (run.stderr.includes('replay: building tables') ? true : undefined), 60_000);
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mailtally:replay'`.execute(db.kysely);
    const exit = await run.waitForExit(60_000);
    expect(exit.code, run.describe()).toBe(1);
    expect(run.stderr).toMatch(/mailtally: the database connection broke \(.+\): is the server at DATABASE_URL up\? Each write commits whole or not at all/);
    // Its process has ended: what it could not let go of (its lease connection ended too) goes now, for the next tests.
    await sql`DELETE FROM leases WHERE name LIKE 'replay%'`.execute(db.kysely);
  }, 180_000);

  // Quit at a second Ctrl-C, the run ends its connections on the server first: Postgres would
  // otherwise run their statements on (here a DROP waits for a lock for as long as it is held).
  it('ends the statements it has running in the database when quit at a second Ctrl-C', async () => {
    const locked = 'statcounters__shadow';
    const running = async () =>
      (await sql<{ query: string }>`SELECT query FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mailtally:replay' AND state = 'active'`.execute(db.kysely)).rows;
    await sql.raw(`CREATE TABLE ${locked} (n int)`).execute(db.kysely);
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE ${locked} IN ACCESS EXCLUSIVE MODE`);
      const run = spawnCli(['replay'], { env });
      await waitFor('the replay to wait for the lock', async () => (await running()).some((r) => r.query.startsWith(`DROP TABLE IF EXISTS ${locked}`)), 60_000);
      run.signal('SIGINT');
      await run.waitFor('the first Ctrl-C to be heard', () => (run.stderr.includes('Stopping after the current step') ? true : undefined), 10_000);
      run.signal('SIGINT');
      const exit = await run.waitForExit(10_000);
      expect(exit.code, run.describe()).toBe(130);
      // The server notices an ended connection at once; give it a moment, not the lock's release.
      await waitFor('the run’s statements to end', async () => (await running()).length === 0, 5_000).catch(() => {});
      expect(await running()).toEqual([]);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
      await sql.raw(`DROP TABLE IF EXISTS ${locked}`).execute(db.kysely);
    }
  }, 120_000);
});
