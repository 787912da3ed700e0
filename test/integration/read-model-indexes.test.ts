import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import type { Db } from '../../src/db/connect.js';
import { ensureProjectionTables } from '../../src/projector/tables.js';
import { DIALECTS, openMigratedDb } from '../support/databases.js';

/** A read model's indexes follow its spec at start: a new one is built, one it no longer names is dropped. */
describe.each(DIALECTS)('read-model indexes at start on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
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
});
