import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import pg from 'pg';
import { DIALECTS, openMigratedDb } from '../support/databases.js';

/** A read model's indexes follow its spec at start: a new one is built, one it no longer names is dropped. */
describe.each(DIALECTS)('read-model indexes at start on %s', (dialect) => {
  let db: Db;
  let url: string | null;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, url, cleanup } = await openMigratedDb(dialect));
  });
  afterAll(async () => cleanup());

  const indexes = async () =>
    (await sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'messages' ORDER BY 1`.execute(db.kysely)).rows.map((r) => r.name);

  it('drops an index an earlier version named and this one does not, keeps an operator`s own, builds the new one', async () => {
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    // As an earlier version left the table: (api_key_id, email), which no query used.
    await sql`DROP INDEX messages__api_key_id_lower_email_idx`.execute(db.kysely);
    await sql`CREATE INDEX messages__api_key_id_email_idx ON messages (api_key_id, email)`.execute(db.kysely);
    await sql`CREATE INDEX messages_by_status_mine ON messages (status)`.execute(db.kysely);
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    const now = await indexes();
    expect(now).not.toContain('messages__api_key_id_email_idx');
    expect(now).toContain('messages_by_status_mine');
    expect(now).toContain('messages__api_key_id_lower_email_idx');
    const spec = PROJECTIONS.flatMap((p) => p.tables).find((t) => t.name === 'messages');
    expect(now).toHaveLength((spec?.indexes ?? []).length + 2); // its key, and the operator's
  });

  // Reads queue behind a DROP INDEX waiting for its lock: it waits 2 s at most, then leaves the
  // index for the next start.
  it.runIf(dialect === 'postgres')('leaves an obsolete index for the next start while a reader holds the table', async () => {
    await sql`CREATE INDEX IF NOT EXISTS messages__api_key_id_email_idx ON messages (api_key_id, email)`.execute(db.kysely);
    const reader = new pg.Client({ connectionString: url as string });
    await reader.connect();
    try {
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM messages');
      await ensureProjectionTables(db.kysely, PROJECTIONS);
      expect(await indexes()).toContain('messages__api_key_id_email_idx');
      await reader.query('COMMIT');
      await ensureProjectionTables(db.kysely, PROJECTIONS);
      expect(await indexes()).not.toContain('messages__api_key_id_email_idx');
    } finally {
      await reader.end();
    }
  });
});
