import { type RawBuilder, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../../projections/index.js';
import { type CampaignFilterValues, campaignConditions } from '../../../src/api/conventions/campaign-filters.js';
import type { Db } from '../../../src/db/connect.js';
import { ensureProjectionTables } from '../../../src/projector/tables.js';
import { openMigratedDb } from '../../support/databases.js';

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
    ({ db, cleanup } = await openMigratedDb('postgres'));
    await ensureProjectionTables(db.kysely, PROJECTIONS);
    await sql`INSERT INTO campaign_stats (api_key_id, campaign_id, processed, delivered, opened, clicked, bounced, blocked, spam, unsub, messages, named, first_message_time)
      SELECT ${TENANT}::int8, c, 10, 10, 0, 0, 0, 0, 0, 0, 10, 10, 1700000000 + c * 60 FROM generate_series(1, 2000) AS c`.execute(db.kysely);
    await sql`INSERT INTO campaigns (api_key_id, campaign_id, title, subject, id_type, status, send_time_start, starred, edit_mode, edit_type, updated_at)
      SELECT ${TENANT}::int8, c, 'c' || c, 's', 'CM', 2, 1700000000 + c * 60, c % 4 = 0, 'tool', 'full', 1700000000 FROM generate_series(1, 20) AS c`.execute(db.kysely);
    await sql`INSERT INTO link_clicks (api_key_id, campaign_id, list_id, sender_id, sender, sender_domain, custom_campaign, url, clicked_messages, clicked_events, link_id)
      SELECT ${TENANT}::int8, c, 0, 0, '', '', '', 'https://example.com/' || u, 1, 1, u + 1 FROM generate_series(1, 2000) AS c, generate_series(1, 10) AS u`.execute(db.kysely);
    await sql`ANALYZE campaign_stats, campaigns, link_clicks`.execute(db.kysely);
  });
  afterAll(async () => cleanup());

  /** Rows the plan of `tenant AND filter` read from link_clicks. */
  async function rowsRead(filter: CampaignFilterValues): Promise<number> {
    const where: RawBuilder<unknown>[] = [sql`t.api_key_id = ${TENANT}::int8`, ...campaignConditions(TENANT, filter)];
    const q = sql`SELECT t.url FROM link_clicks t WHERE ${sql.join(where, sql` AND `)}`.compile(db.kysely);
    const args = q.parameters.map((p) => (Array.isArray(p) ? `ARRAY[${p.map((v) => `'${String(v)}'`).join(',')}]` : `'${String(p)}'`));
    const text = q.sql.replace(/\$(\d+)/g, (_, n: string) => args[Number(n) - 1] as string);
    const explained = await sql.raw<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`).execute(db.kysely);
    let read = 0;
    const walk = (node: Record<string, unknown>) => {
      // Each per loop (an inner side of a nested loop runs once per outer row).
      const perLoop = Number(node['Actual Rows']) + Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0);
      if (node['Relation Name'] === 'link_clicks') read += perLoop * Number(node['Actual Loops'] ?? 1);
      for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk(((explained.rows[0]?.['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0] as { Plan: Record<string, unknown> }).Plan);
    return read;
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
    expect(await rowsRead(filter)).toBe(rows);
  });
});
