import { type Kysely, type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import type { Database } from '../../db/schema.js';
import { CAMPAIGN_FILTERS, CAMPAIGN_FILTER_ALIASES, campaignConditions } from '../conventions/campaign-filters.js';
import { wireId, wireInt } from '../conventions/json.js';
import { type Page, itemFilters, listSchema } from '../conventions/paging.js';
import { bool, int64, parseQuery } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { readList, tenant } from '../list-query.js';
import { type ListResult, defineResource } from '../resource.js';
import { stableIdSql, utf8 } from '../../../projections/kit/sql.js';
import { itemId } from './item-id.js';

/**
 * /toplinkclicked — clicks per URL over the messages the campaign filter block selects: from
 * `link_clicks` (projections/link-clicks.ts), or, when Contact or Message is given, from the
 * per-click rows of `click_stats` grouped by URL (the same normalized URLs).
 * - ClickedCount: messages that clicked the URL; click events with ActualClicks=true.
 * - ID is the link's id, the same as LinkId (a stable id per normalized URL and tenant): the
 *   records are per link. From `click_stats` LinkId is computed in SQL exactly as link-clicks
 *   computes it (projections/kit/ids.ts: SHA-256 of "url:" + URL, first 48 bits, plus one).
 * - Default order: ClickedCount DESC (top links first), then LinkId. Sort: ID / LinkId,
 *   ClickedCount, Url, both directions.
 * - The item form /{ID} takes the same filters, e.g. /toplinkclicked/{ID}?CampaignID=7.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  ActualClicks: bool().optional().meta({ description: 'ClickedCount counts click events instead of clicking messages' }),
  Contact: int64({ signed: true }).optional().meta({ description: 'Clicks by this contact id' }),
  Message: int64().optional().meta({ description: 'Clicks in this message' }),
});
type Query = z.output<typeof query>;
const ALIASES = { ...CAMPAIGN_FILTER_ALIASES, contactid: 'contact', messageid: 'message' };
const ITEM_QUERY = itemFilters(query);

const record = z.object({
  ClickedCount: z.number().int(),
  ID: z.number().int().meta({ description: 'The link id (same as LinkId)' }),
  LinkId: z.number().int(),
  Url: z.string(),
});

interface Row {
  link_id: bigint;
  url: string;
  clicked_messages: bigint;
  clicked_events: bigint;
}

/** projections/kit/ids.ts `stableId('url:' + url)`, in SQL (`stableIdSql`). */
const LINK_ID = sql.raw(stableIdSql(utf8("'url:' || t.url")));

/** Per-URL counts for the filters, as a subquery aliased `l`; `linkId` narrows it to one link. */
function links(apiKeyId: string, q: Query, linkId?: bigint): RawBuilder<unknown> {
  const where = [tenant(apiKeyId, sql.ref('t.api_key_id')), ...campaignConditions(apiKeyId, q)];
  if (q.Contact === undefined && q.Message === undefined) {
    if (linkId !== undefined) where.push(sql`t.link_id = ${linkId.toString()}::int8`);
    return sql`(SELECT t.api_key_id, t.url, max(t.link_id) AS link_id,
        sum(t.clicked_messages)::int8 AS clicked_messages, sum(t.clicked_events)::int8 AS clicked_events
      FROM link_clicks t WHERE ${sql.join(where, sql` AND `)} GROUP BY t.api_key_id, t.url) l`;
  }
  where.push(sql`t.url <> ''`);
  if (q.Contact !== undefined) where.push(sql`t.contact_id = ${q.Contact.toString()}::int8`);
  if (q.Message !== undefined) where.push(sql`t.message_id = ${q.Message.toString()}::numeric`);
  const one = linkId !== undefined ? sql`WHERE link_id = ${linkId.toString()}::int8` : sql``;
  return sql`(SELECT * FROM (SELECT t.api_key_id, t.url, ${LINK_ID} AS link_id,
        count(DISTINCT t.message_id)::int8 AS clicked_messages, count(*)::int8 AS clicked_events
      FROM click_stats t WHERE ${sql.join(where, sql` AND `)} GROUP BY t.api_key_id, t.url) c ${one}) l`;
}

async function read(db: Kysely<Database>, apiKeyId: string, q: Query, page: Page, linkId?: bigint): Promise<ListResult> {
  const count = q.ActualClicks === true ? sql.ref('clicked_events') : sql.ref('clicked_messages');
  const sortable = { ID: sql.ref('link_id'), LinkId: sql.ref('link_id'), ClickedCount: count, Url: sql.ref('url') };
  const { rows, total } = await readList<Row>(
    db,
    { from: links(apiKeyId, q, linkId), columns: sql`*`, where: [tenant(apiKeyId)], orderBy: orderBy('toplinkclicked', q.Sort, sortable, [sql`${count} DESC`, sql`link_id`, sql`url`]) },
    page,
  );
  return { rows: rows.map((r) => toWire(r, q.ActualClicks === true)), total };
}

export const toplinkclickedResource = defineResource({
  name: 'toplinkclicked',
  description: 'Clicks per link (top links first), over the campaigns and messages the filters select.',
  query,
  record,
  aliases: ALIASES,
  unsupported: { MessageStatus: 'Mailjet takes it on the message-event resources, not here' },
  list: ({ db, principal, query: q, page }) => read(db, principal.apiKeyId, q, page),
  items: [
    {
      path: ':id',
      description: 'One link by its id, with the same filters as the list.',
      query: ITEM_QUERY,
      async find({ db, principal, rawQuery }, params) {
        const id = itemId(params['id'] ?? '', 'ID');
        const q = parseQuery(ITEM_QUERY, rawQuery, ALIASES);
        if (id === null) return [];
        return (await read(db, principal.apiKeyId, q, { limit: 1000, offset: 0, countOnly: false }, id)).rows;
      },
    },
  ],
});

function toWire(r: Row, actualClicks: boolean): Record<string, unknown> {
  return {
    ClickedCount: wireInt(actualClicks ? r.clicked_events : r.clicked_messages),
    ID: wireId(r.link_id),
    LinkId: wireId(r.link_id),
    Url: r.url,
  };
}
