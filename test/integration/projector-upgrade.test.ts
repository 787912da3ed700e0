import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Projection } from '../../projections/kit/types.js';
import type { Db } from '../../src/db/connect.js';
import { down as migrationDown, up as migrationUp } from '../../src/db/migrations/0006-checkpoint-versions.js';
import { down as countedDown, up as countedUp } from '../../src/db/migrations/0011-counted-messages.js';
import { MIGRATION_LOCK_TIMEOUT_MS, migrateToLatest } from '../../src/db/migrate.js';
import { ensureProjectionCheckpoints } from '../../src/log/checkpoints.js';
import { replay } from '../../src/projector/replay.js';
import type { Projector } from '../../src/projector/runner.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';
import { sampleEvents } from '../support/events.js';
import { waitFor } from '../support/harness.js';
import { append, caughtUp, NO_DIFFERENCES, startProjector, verifyAgainstReplay } from '../support/projections.js';

/**
 * A rolling upgrade: a projector of the old version keeps running while a process of the new
 * version rebuilds the read models and swaps them in. From then on the old runner must not fold
 * into them (its code is not the code that built them): its writes fail their compare-and-set,
 * it lets go of the projections for good, and a runner of the new version takes them over.
 *
 * The "old version" here projects nothing, so a batch it still applied after the swap would move
 * the checkpoints past events without their contributions, and the tables would differ from a
 * replay.
 */
const OLD: readonly Projection[] = PROJECTIONS.map((p) => ({ ...p, version: p.version - 1, project: () => {} }));

describe.each(DIALECTS)('a projector of an older version beside a rebuild by the new one, on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  const runners: Projector[] = [];

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => {
    for (const r of runners) await r.stop();
    await cleanup();
  });

  it('lets go of the rebuilt read models; the new version takes them over and the tables equal a replay', async () => {
    // The old version built the tables and is caught up.
    expect(await ensureProjectionTables(db.kysely, OLD)).toEqual([]);
    for (let m = 0; m < 10; m++) await append(db, '1', sampleEvents(String(300 + m), 1_433_333_949 + m * 97));
    const old = await startProjector(db, { leaseMs: 1000 }, OLD);
    runners.push(old);
    await caughtUp(db, OLD);
    expect(old.stats.held).toHaveLength(PROJECTIONS.length);

    // The new version's process rebuilds every read model while the old runner runs.
    await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
    for (let m = 10; m < 20; m++) await append(db, '1', sampleEvents(String(300 + m), 1_433_333_949 + m * 97));
    await waitFor('the old runner to let go of every projection', async () => old.stats.superseded.length === PROJECTIONS.length, 20_000);
    expect(old.stats.held).toEqual([]);

    const current = await startProjector(db, { leaseMs: 1000 });
    runners.push(current);
    await caughtUp(db);
    expect(current.stats.held).toHaveLength(PROJECTIONS.length);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
    // The old runner does not take them back.
    expect(old.stats.held).toEqual([]);
  }, 120_000);
});

describe.each(DIALECTS)('migration 0006 on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('records with each projection checkpoint already there the version of the code that built its read models', async () => {
    await ensureProjectionTables(db.kysely, OLD);
    await ensureProjectionCheckpoints(db.kysely, OLD.map((p) => p.name));
    await sql`INSERT INTO checkpoints (name, position) VALUES ('webhooks', 7)`.execute(db.kysely);
    // A database from before the migration: no versions with the checkpoints.
    const kysely = db.kysely as unknown as Kysely<unknown>;
    await migrationDown(kysely);
    await migrationUp(kysely);
    const { rows } = await sql<{ name: string; version: number | null }>`SELECT name, version FROM checkpoints`.execute(db.kysely);
    const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    expect(rows.sort(byName)).toEqual([...OLD.map((p) => ({ name: p.name, version: p.version })), { name: 'webhooks', version: null }].sort(byName));
  });

  it('a runner finding checkpoints with no version records the one that built the tables, not its own, and lets go', async () => {
    // The tables are the old version's (above); the checkpoints have lost their versions.
    await sql`UPDATE checkpoints SET version = NULL`.execute(db.kysely);
    await append(db, '1', sampleEvents('400', 1_433_333_949));
    const current = await startProjector(db, { leaseMs: 1000 });
    try {
      await waitFor('the runner to let go of every projection', async () => current.stats.superseded.length === PROJECTIONS.length, 20_000);
    } finally {
      await current.stop();
    }
    const { rows } = await sql<{ name: string; version: number | null }>`SELECT name, version FROM checkpoints WHERE name <> 'webhooks'`.execute(db.kysely);
    expect(Object.fromEntries(rows.map((r) => [r.name, r.version]))).toEqual(Object.fromEntries(OLD.map((p) => [p.name, p.version])));
  });
});

describe.each(DIALECTS)('migration 0011 on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  const TABLES = ['campaign_stats', 'contact_stats', 'list_recipient_stats'];
  const REBUILT = ['campaign-overview', 'contact-statistics', 'list-recipient-statistics'];

  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('gives tables built before it the columns the API reads, and the new versions rebuild them', async () => {
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    for (let m = 0; m < 5; m++) await append(db, '1', sampleEvents(String(500 + m), 1_433_333_949 + m * 97));
    // One message whose events disagree: counted in campaign 9, also naming campaign 8.
    await append(db, '1', [
      { event: 'sent', time: 1_433_334_000, MessageID: '600', email: 'a@example.org', mj_campaign_id: 8 },
      { event: 'open', time: 1_433_334_100, MessageID: '600', email: 'a@example.org', mj_campaign_id: 9 },
    ]);
    await replay(db, PROJECTIONS, { readBatch: 1000, catchUpBatch: 1000 });
    // A database from before the migration: the tables of the older versions, which lack the columns.
    const kysely = db.kysely as unknown as Kysely<unknown>;
    await countedDown(kysely);
    await sql`UPDATE projections SET version = version - 1 WHERE name IN (${sql.join(REBUILT)})`.execute(db.kysely);
    await sql`UPDATE checkpoints SET version = version - 1 WHERE name IN (${sql.join(REBUILT)})`.execute(db.kysely);

    await countedUp(kysely);
    await countedUp(kysely); // a second run changes nothing
    for (const table of TABLES) {
      const { rows } = await sql<{ all: number; counted: number }>`SELECT count(*)::int AS all, count(*) FILTER (WHERE messages > 0)::int AS counted FROM ${sql.table(table)}`.execute(db.kysely);
      expect(rows[0]?.all, table).toBeGreaterThan(0);
      expect(rows[0]?.counted, table).toBe(rows[0]?.all);
    }

    const stale = await ensureProjectionTables(db.kysely, PROJECTIONS);
    expect(stale.map((p) => p.name).sort()).toEqual(REBUILT);
    await replay(db, stale, { readBatch: 1000, catchUpBatch: 1000 });
    expect(await ensureProjectionTables(db.kysely, PROJECTIONS)).toEqual([]);
    expect(await verifyAgainstReplay(db)).toEqual(NO_DIFFERENCES);
    const { rows } = await sql<{ campaign_id: string; messages: string; named: string }>`
      SELECT campaign_id::text, messages::text, named::text FROM campaign_stats WHERE campaign_id IN (8, 9) ORDER BY campaign_id`.execute(db.kysely);
    expect(rows).toEqual([
      { campaign_id: '8', messages: '0', named: '1' },
      { campaign_id: '9', messages: '1', named: '1' },
    ]);
  }, 120_000);
});

/**
 * A migration altering a read-model table while a long reader holds it (an open transaction, a
 * pg_dump): reads of the table must not queue behind the ALTER waiting for its lock. The
 * migrations step back after MIGRATION_LOCK_TIMEOUT_MS and try again, and apply once the reader lets go.
 */
describe('a migration behind a long reader, on postgres', () => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb('postgres'));
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    // As before 0011: its columns gone, and it not yet applied.
    await countedDown(db.kysely as unknown as Kysely<unknown>);
    await sql`DELETE FROM mailtally_migrations WHERE name = '0011-counted-messages'`.execute(db.kysely);
  });
  afterAll(async () => cleanup());

  it('lets reads of the table go on while it waits, and applies once the reader lets go', async () => {
    const reader = new pg.Client({ connectionString: url as string });
    const other = new pg.Client({ connectionString: url as string });
    await Promise.all([reader.connect(), other.connect()]);
    try {
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM contact_stats');
      const waits: number[] = [];
      const migrated = migrateToLatest(db.kysely, { onLockWait: (_m, tries) => waits.push(tries) });
      await waitFor('the migrations to step back once', async () => waits.length > 0, 10_000);
      // A read from a third connection answers while the reader still holds the table (the code
      // before: it queued behind the ALTER until the reader let go).
      const began = Date.now();
      await other.query('SELECT count(*) FROM contact_stats');
      expect(Date.now() - began).toBeLessThan(MIGRATION_LOCK_TIMEOUT_MS + 1000);
      await reader.query('COMMIT');
      const results = await migrated;
      expect(results.map((r) => [r.migrationName, r.status])).toEqual([['0011-counted-messages', 'Success']]);
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'contact_stats' AND column_name IN ('messages', 'named')`.execute(db.kysely);
      expect(rows[0]?.n).toBe(2);
      // The pool's connection is back to the server's lock_timeout.
      const { rows: timeout } = await sql<{ t: string }>`SELECT current_setting('lock_timeout') AS t`.execute(db.kysely);
      expect(timeout[0]?.t).toBe('0');
    } finally {
      await reader.end();
      await other.end();
    }
  }, 60_000);
});

/**
 * The migrations' own bookkeeping (kysely's check for its tables) lists every table of the
 * schema and looks each up: a table dropped meanwhile, as a replay's shadow and work tables come
 * and go, failed the start of any process with 42P01 before any migration ran.
 */
describe('migrations beside tables that come and go, on postgres', () => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb('postgres'));
  });
  afterAll(async () => cleanup());

  it('are not failed by a table dropped while they look', async () => {
    const churn = new pg.Client({ connectionString: url as string });
    await churn.connect();
    let stop = false;
    const churning = (async () => {
      for (let i = 0; !stop; i++) {
        const names = Array.from({ length: 20 }, (_, k) => `churn_${i % 2}_${k}`);
        await churn.query(names.map((n) => `CREATE TABLE ${n} (id int)`).join(';'));
        await churn.query(names.map((n) => `DROP TABLE ${n}`).join(';'));
      }
    })();
    try {
      for (let i = 0; i < 150; i++) expect(await migrateToLatest(db.kysely)).toEqual([]);
    } finally {
      stop = true;
      await churning;
      await churn.end();
    }
  }, 120_000);
});
