import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { PROJECTIONS } from '../../projections/index.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { runCli, spawnCli, stopAll } from '../support/processes.js';
import { append, NO_DIFFERENCES, verifyAgainstReplay } from '../support/projections.js';

/**
 * Ctrl-C during `mailtally replay`: the run stops after the statement in progress, leaves the
 * live tables as they were, drops its work tables and lets go of its read models, so running it
 * again at once rebuilds them.
 */

let db: Db;
let env: Record<string, string>;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  let url: string | null;
  ({ db, url, cleanup } = await openMigratedDb('postgres'));
  env = { DATABASE_URL: url as string, LOG_LEVEL: 'warn' };
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
  it('stops at Ctrl-C, keeps nothing of the run, and can run again at once', async () => {
    const statcountersBefore = await sql<{ n: number }>`SELECT count(*)::int AS n FROM statcounters`.execute(db.kysely);
    const run = spawnCli(['replay'], { env });
    await run.waitFor('the rebuild to start building tables', () => (run.stderr.includes('replay: building tables') ? true : undefined), 60_000);
    run.signal('SIGINT');
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
});
