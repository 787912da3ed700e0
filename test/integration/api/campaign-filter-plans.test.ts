import { type RawBuilder, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../../projections/index.js';
import { type CampaignFilterValues, campaignConditions } from '../../../src/api/conventions/campaign-filters.js';
import type { Db } from '../../../src/db/connect.js';
import { ensureProjectionTables } from '../../../src/projector/tables.js';
import { openMigratedDb } from '../../support/databases.js';
import { explainAnalyze, rowsRead } from '../../support/plan-reads.js';

/**
 * The campaign-level filters (send time, status, flags, FromType) pick a set of campaigns; the
 * rows of those campaigns are then found through the table's (tenant, campaign) index, not by
 * reading every row of the tenant and matching each. Tenant 7: 2,000 campaigns of 10 link rows
 * each (20,000 rows), one campaign sent per minute; 20 of them have metadata, 5 starred.
 */
const TENANT = '7';

describe('campaign-level filters on a tenant with many campaigns', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await dbWithCampaigns(TENANT, 10));
    await sql`INSERT INTO campaigns (api_key_id, campaign_id, title, subject, id_type, status, send_time_start, starred, edit_mode, edit_type, updated_at)
      SELECT ${TENANT}::int8, c, 'c' || c, 's', 'CM', 2, 1700000000 + c * 60, c % 4 = 0, 'tool', 'full', 1700000000 FROM generate_series(1, 20) AS c`.execute(db.kysely);
    await sql`INSERT INTO link_clicks (api_key_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, url, clicked_messages, clicked_events, link_id)
      SELECT ${TENANT}::int8, c, 0, 0, '', '', '', 'https://example.com/' || u, 1, 1, u + 1 FROM generate_series(1, 2000) AS c, generate_series(1, 10) AS u`.execute(db.kysely);
    await sql`ANALYZE campaign_stats, campaigns, link_clicks`.execute(db.kysely);
  });
  afterAll(async () => cleanup());

  /** Rows the plan of `tenant AND filter` read from link_clicks. */
  async function linkRowsRead(filter: CampaignFilterValues): Promise<number> {
    const where: RawBuilder<unknown>[] = [sql`t.api_key_id = ${TENANT}::int8`, ...campaignConditions(TENANT, filter)];
    return rowsRead(await explainAnalyze(db.kysely, sql`SELECT t.url FROM link_clicks t WHERE ${sql.join(where, sql` AND `)}`.compile(db.kysely)), 'link_clicks');
  }

  // With `t.campaign_id IN (SELECT …)` and a correlated EXISTS (the code before), the planner
  // chose by its estimate of the campaigns: FromTS alone and FromType 1 read the tenant's 20,000
  // rows, FromType 2 201; the others were found through the index already.
  it.each([
    ['a send-time window of three campaigns', { FromTS: 1700000000 + 1000 * 60, ToTS: 1700000000 + 1003 * 60 }, 30],
    ['the last five campaigns sent (FromTS alone)', { FromTS: 1700000000 + 1996 * 60 }, 50],
    ['FromType 2 (campaigns with metadata)', { FromType: 2 }, 200],
    ['FromType 1 (campaigns without)', { FromType: 1 }, 19_800],
    ['IsStarred', { IsStarred: true }, 50],
    ['CampaignStatus 2 and a window', { CampaignStatus: 2, FromTS: 1700000000 + 1990 * 60 }, 110],
  ] as [string, CampaignFilterValues, number][])('%s reads its campaigns` rows only', async (_what, filter, rows) => {
    expect(await linkRowsRead(filter)).toBe(rows);
  });
});

/**
 * The same on a per-click table, where a message sent without a campaign is placed in a send-time
 * window by its own time: tenant 8 has 2,000 campaigns of 5 clicks and 10,000 campaign-less
 * messages of one click each, a message a minute.
 */
describe('a send-time window on a per-click table with campaign-less messages', () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await dbWithCampaigns('8', 5));
    // Messages: 5 per campaign (ids 1..10000), then 10,000 without one (ids 10001..20000).
    await sql`INSERT INTO messages (api_key_id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, email, recipient_domain, esp,
        message_time, status, state_id, is_state_permanent, first_open_at, first_click_at, last_activity_at, attempt_count, event_count)
      SELECT 8, i, i, CASE WHEN i <= 10000 THEN (i + 4) / 5 ELSE 0 END, 0, 0, '', '', '', 'u' || i || '@example.com', 'example.com', 'Other',
        CASE WHEN i <= 10000 THEN 1700000000 + ((i + 4) / 5) * 60 ELSE 1700000000 + (i - 10000) * 60 END, 'clicked', NULL, false, NULL, NULL, 1700000000, 1, 2
      FROM generate_series(1, 20000) AS i`.execute(db.kysely);
    await sql`INSERT INTO click_stats (api_key_id, id, message_id, contact_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, clicked_at, clicked_delay, url, user_agent_id, ua_platform, ua_client)
      SELECT api_key_id, message_id, message_id, contact_id, campaign_id, 0, 0, '', '', '', message_time + 30, 30, 'https://example.com/', 0, '', '' FROM messages WHERE api_key_id = 8`.execute(db.kysely);
    await sql`ANALYZE campaign_stats, messages, click_stats`.execute(db.kysely);
  });
  afterAll(async () => cleanup());

  it('reads the window`s campaigns` clicks and its campaign-less messages` clicks only', async () => {
    // Minutes 1000 to 1002: campaigns 1000-1002 (15 clicks) and campaign-less messages 11000-11002 (3).
    const where = [sql`t.api_key_id = 8`, ...campaignConditions('8', { FromTS: 1700000000 + 1000 * 60, ToTS: 1700000000 + 1003 * 60 }, { perMessage: true })];
    const q = sql`SELECT t.id FROM click_stats t WHERE ${sql.join(where, sql` AND `)}`.compile(db.kysely);
    expect((await db.kysely.executeQuery(q)).rows).toHaveLength(18);
    // The code before read the tenant's 20,000 clicks (and every campaign-less message's row).
    expect(rowsRead(await explainAnalyze(db.kysely, q), 'click_stats')).toBe(18);
  });
});

/** A database with the read models' tables, and `tenant`'s 2,000 campaigns of `messages` each, the n-th sent at minute n. */
async function dbWithCampaigns(tenant: string, messages: number): Promise<{ db: Db; cleanup: () => Promise<void> }> {
  const opened = await openMigratedDb('postgres');
  await ensureProjectionTables(opened.db.kysely, PROJECTIONS);
  await sql`INSERT INTO campaign_stats (api_key_id, campaign_id, processed, delivered, opened, clicked, bounced, blocked, spam, unsub, messages, named, first_message_time)
    SELECT ${tenant}::int8, c, ${messages}, ${messages}, 0, 0, 0, 0, 0, 0, ${messages}, ${messages}, 1700000000 + c * 60 FROM generate_series(1, 2000) AS c`.execute(opened.db.kysely);
  return opened;
}
