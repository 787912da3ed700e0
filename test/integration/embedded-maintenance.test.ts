import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { maintainEmbedded } from '../../src/db/embedded-maintenance.js';
import { openMigratedDb } from '../support/databases.js';

/**
 * The embedded database has no autovacuum: without the service's own rounds, the space of
 * deleted rows (the webhook outbox's, every one of them once delivered) is never used again.
 */
describe('embedded database maintenance', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb('pglite'));
  });
  afterAll(async () => cleanup?.());

  const size = async () => Number((await sql<{ n: string }>`SELECT pg_relation_size('churn') AS n`.execute(db.kysely)).rows[0]?.n);

  it('keeps a smaller write-ahead log than the 1 GB PGlite sets by default', async () => {
    expect((await sql<{ max_wal_size: string }>`SHOW max_wal_size`.execute(db.kysely)).rows[0]?.max_wal_size).toBe('256MB');
  });

  it('gives back the space of deleted rows', async () => {
    await sql`CREATE TABLE churn (id int, body text)`.execute(db.kysely);
    await sql`INSERT INTO churn SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`.execute(db.kysely);
    await sql`DELETE FROM churn`.execute(db.kysely);
    const before = await size();
    expect(before).toBeGreaterThan(1_000_000);
    await maintainEmbedded(db);
    expect(await size()).toBeLessThan(before / 10);
  });
});
