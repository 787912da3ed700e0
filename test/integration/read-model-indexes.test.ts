import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projections/index.js';
import { campaignConditions } from '../../src/api/conventions/campaign-filters.js';
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

/**
 * The filters the API offers (campaign, list, sender id and address, sender domain, custom
 * campaign, contact; the campaign-level ones become a campaign filter) are answered from an index
 * on every read model that has their column: one whose keys begin with the tenant and the
 * filter's column, or the expression the API compares (`lower(sender)`), as the database holds
 * them after start. (An index with the column further along, such as a counter table's key, makes
 * the scan read every index entry of the tenant.)
 */
describe.each(DIALECTS)('read-model filter indexes on %s', (dialect) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await openMigratedDb(dialect));
    await ensureProjectionTables(db.kysely, PROJECTIONS);
  });
  afterAll(async () => cleanup());

  // The column, and what the API's condition compares (api/conventions/campaign-filters.ts).
  const FILTERS: [string, string][] = [
    ['campaign_id', 'campaign_id'],
    ['list_id', 'list_id'],
    ['sender_id', 'sender_id'],
    ['sender', 'lower(sender)'],
    ['sender_domain', 'sender_domain'],
    ['custom_campaign', 'custom_campaign'],
    ['contact_id', 'contact_id'],
  ];
  const cases = PROJECTIONS.flatMap((p) => p.tables).flatMap((spec) => {
    const columns = new Set([...spec.keys, ...(spec.kind === 'counters' ? [...spec.sums, ...(spec.maxes ?? []), ...(spec.mins ?? [])] : spec.columns)].map((c) => c.name));
    return FILTERS.filter(([column]) => columns.has(column)).map(([column, compared]) => ({ table: spec.name, column, compared }));
  });

  it('the condition the From filter builds compares lower(sender)', () => {
    const [from] = campaignConditions('1', { From: 'News@Example.com' });
    expect(from?.compile(db.kysely).sql).toMatch(/^lower\(t\.sender\) = /);
  });

  // The other filters and item lookups of single resources, as their routes compare them.
  cases.push(
    { table: 'list_recipient_stats', column: 'unsubscribed_at', compared: 'unsubscribed_at' }, // Min/MaxUnsubscribedAt
    { table: 'list_recipient_stats', column: 'last_activity_at', compared: 'last_activity_at' }, // Min/MaxLastActivityAt
    { table: 'contact_stats', column: 'last_activity_at', compared: 'last_activity_at' },
    { table: 'contact_stats', column: 'email', compared: 'lower(email)' }, // /contactstatistics/{Email}, any case
    { table: 'messages', column: 'email', compared: 'lower(email)' }, // ContactAlt
    { table: 'geo_stats', column: 'country', compared: 'country' }, // /geostatistics/{Country}
    { table: 'link_clicks', column: 'link_id', compared: 'link_id' }, // /toplinkclicked/{LinkId}
    { table: 'user_agent_stats', column: 'platform', compared: 'lower(platform)' }, // Platform
  );

  it.each(cases)('$table by $column', async ({ table, compared }) => {
    const { rows } = await sql<{ index: string; first: string; second: string | null }>`
      SELECT c.relname AS index, pg_get_indexdef(i.indexrelid, 1, true) AS first,
        CASE WHEN i.indnkeyatts > 1 THEN pg_get_indexdef(i.indexrelid, 2, true) END AS second
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = ${table}::regclass`.execute(db.kysely);
    const leading = rows.map((r) => `${r.first}, ${r.second ?? ''}`);
    expect(leading, `indexes of ${table}`).toContain(`api_key_id, ${compared}`);
  });
});
