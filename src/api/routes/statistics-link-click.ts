import { sql } from 'kysely';
import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { int64 } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';

/**
 * /statistics/link-click — per URL clicked in one campaign (CampaignID required): messages that
 * clicked it and click events, summed over `link_clicks` (projections/link-clicks.ts) for the
 * campaign. URLs are normalized at ingest (tracking parameters dropped).
 * - PositionIndex: the template is not in the event log, so it is the link's 1-based rank in the
 *   campaign by LinkId (the stable id /toplinkclicked shows), then URL: fixed for a link as long
 *   as no new link of the campaign gets clicked.
 * - Sort (no sort in Mailjet's metadata): PositionIndex (default), URL and the counts.
 * - Keys in the order of Mailjet's documented sample.
 */

const query = listSchema({
  CampaignID: int64({ signed: true }).optional().meta({ description: 'Required: the campaign' }),
});

const record = z.object({
  URL: z.string(),
  PositionIndex: z.number().int().meta({ description: '1-based rank of the link in the campaign, by LinkId' }),
  ClickedMessagesCount: z.number().int(),
  ClickedEventsCount: z.number().int(),
});

interface Row {
  url: string;
  position: bigint;
  clicked_messages: bigint;
  clicked_events: bigint;
}

const SORTABLE = {
  PositionIndex: sql.ref('position'),
  URL: sql.ref('url'),
  ClickedMessagesCount: sql.ref('clicked_messages'),
  ClickedEventsCount: sql.ref('clicked_events'),
};

export const statisticsLinkClickResource = defineResource({
  name: 'statistics/link-click',
  description: 'Clicks per link of a campaign.',
  query,
  record,
  async list({ db, principal, query: q, page }) {
    if (q.CampaignID === undefined) throw apiErrors.badRequest('Missing parameter CampaignID: statistics/link-click needs the campaign id');
    const from = sql`(SELECT t.api_key_id, t.url, sum(t.clicked_messages)::int8 AS clicked_messages, sum(t.clicked_events)::int8 AS clicked_events,
        row_number() OVER (ORDER BY max(t.link_id), t.url) AS position
      FROM link_clicks t
      WHERE ${tenant(principal.apiKeyId, sql.ref('t.api_key_id'))} AND t.campaign_id = ${q.CampaignID.toString()}::int8
      GROUP BY t.api_key_id, t.url) l`;
    const where = [tenant(principal.apiKeyId)];
    const { rows, total } = await readList<Row>(db, { from, columns: sql`*`, where, orderBy: orderBy('statistics/link-click', q.Sort, SORTABLE, [sql`position`]) }, page);
    return {
      rows: rows.map((r) => ({
        URL: r.url,
        PositionIndex: wireInt(r.position),
        ClickedMessagesCount: wireInt(r.clicked_messages),
        ClickedEventsCount: wireInt(r.clicked_events),
      })),
      total,
    };
  },
});
