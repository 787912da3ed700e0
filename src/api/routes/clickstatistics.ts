import { type Kysely, sql } from 'kysely';
import { z } from 'zod';
import type { Database } from '../../db/schema.js';
import { CAMPAIGN_FILTER_ALIASES, CAMPAIGN_FILTERS, MESSAGE_STATUS, campaignConditions, eventWindow, messageStatusCondition } from '../conventions/campaign-filters.js';
import { wireId, wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { int64, timestamp } from '../conventions/params.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { itemId } from './item-id.js';

/**
 * /clickstatistics and /clickstatistics/{ID}: one record per click event, from the
 * `click_stats` read model (projections/click-statistics.ts). `ID` is the click event's id (its
 * position in the event log), unique across tenants.
 *
 * Choices where the reference is silent:
 * - no implicit date window (projections/README.md, the numbers); FromTS/ToTS/Period keep their
 *   shared meaning (the campaign's send time); EventFromTs (inclusive) / EventToTs (exclusive)
 *   are on ClickedAt;
 * - `ClickedDelay` is seconds from the message time to the click, 0 while the message has no
 *   delivery event yet (the delay is unknown);
 * - `UserAgentID` is the id of the parsed user agent (platform + client), the same id
 *   /openinformation and /messagehistory give;
 * - `Url` is the link as clicked, read from the event log (`click_stats` keeps only the link
 *   normalized for grouping, without utm_* and other tracking parameters, as /toplinkclicked
 *   shows it); one extra primary-key lookup per page;
 * - Sort: `ID`, `ClickedAt` and `ClickedDelay`, both directions; the default order is by ID;
 * - a malformed item id is a 400 naming `ID`; an unknown one (or another tenant's) a 404.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  ...MESSAGE_STATUS,
  MessageID: int64().optional(),
  EventFromTs: timestamp('atOrAfter').optional().meta({ description: 'ClickedAt at or after this' }),
  EventToTs: timestamp('before').optional().meta({ description: 'ClickedAt before this' }),
});

const record = z.object({
  ClickedAt: z.string(),
  ClickedDelay: z.number().int().meta({ description: 'Seconds from the message time to the click' }),
  ContactID: z.number().int(),
  ID: z.number().int().meta({ description: 'Click event id' }),
  MessageID: z.number().int().meta({ description: '64-bit message id' }),
  Url: z.string(),
  UserAgentID: z.number().int(),
});

interface Row {
  id: bigint;
  message_id: string;
  contact_id: bigint;
  clicked_at: bigint;
  clicked_delay: bigint | null;
  url: string;
  user_agent_id: bigint;
}

const COLUMNS = sql`t.id, t.message_id, t.contact_id, t.clicked_at, t.clicked_delay, t.url, t.user_agent_id`;
/** The page's order by id: see `idOrder` for why it depends on the filters given. */
const byId = (filtered: boolean) => idOrder(sql.ref('t.id'), filtered);
const sortable = (filtered: boolean) => ({ ID: byId(filtered), ClickedAt: sql.ref('t.clicked_at'), ClickedDelay: sql`COALESCE(t.clicked_delay, 0)` });

export const clickstatisticsResource = defineResource({
  name: 'clickstatistics',
  description: 'Click events: one record per click.',
  query,
  record,
  aliases: CAMPAIGN_FILTER_ALIASES,
  async list({ db, principal, query: q, page }) {
    // Filters an index answers; a message's status has none (see idOrder).
    const indexed = [
      ...campaignConditions(principal.apiKeyId, q, { perMessage: true }),
      ...(q.MessageID !== undefined ? [sql`t.message_id = ${q.MessageID.toString()}::numeric`] : []),
      ...eventWindow(sql.ref('t.clicked_at'), q.EventFromTs, q.EventToTs),
    ];
    const filtered = indexed.length > 0;
    const where = [tenant(principal.apiKeyId, sql.ref('t.api_key_id')), ...indexed, ...messageStatusCondition(principal.apiKeyId, q.MessageStatus)];
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`click_stats t`, key: sql`t.api_key_id, t.id`, columns: COLUMNS, where, orderBy: orderBy('clickstatistics', q.Sort, sortable(filtered), [byId(filtered)]) },
      page,
    );
    return { rows: await withClickedUrls(db, rows), total };
  },
  items: [
    {
      path: ':id',
      description: 'One click event by its ID.',
      async find({ db, principal }, params) {
        const ID = itemId(params['id'] ?? '', 'ID');
        if (ID === null) return [];
        const { rows } = await sql<Row>`SELECT ${COLUMNS} FROM click_stats t
          WHERE ${tenant(principal.apiKeyId, sql.ref('t.api_key_id'))} AND t.id = ${ID.toString()}::int8`.execute(db);
        return withClickedUrls(db, rows);
      },
    },
  ],
});

/** The page's records, with each click's URL as it arrived (from the log, by position). */
async function withClickedUrls(db: Kysely<Database>, rows: readonly Row[]): Promise<Record<string, unknown>[]> {
  if (rows.length === 0) return [];
  const { rows: raw } = await sql<{ position: bigint; url: string | null }>`
    SELECT position, payload->>'url' AS url FROM events WHERE position = ANY(${rows.map((r) => r.id.toString())}::int8[])`.execute(db);
  const urls = new Map(raw.map((r) => [r.position.toString(), r.url]));
  return rows.map((r) => toWire(r, urls.get(r.id.toString()) ?? r.url));
}


function toWire(r: Row, url: string): Record<string, unknown> {
  return {
    ClickedAt: rfc3339(r.clicked_at),
    ClickedDelay: wireInt(r.clicked_delay),
    ContactID: wireId(r.contact_id),
    ID: wireId(r.id),
    MessageID: wireId(r.message_id),
    Url: url,
    UserAgentID: wireId(r.user_agent_id),
  };
}
