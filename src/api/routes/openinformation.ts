import { sql } from 'kysely';
import { z } from 'zod';
import { CAMPAIGN_FILTER_ALIASES, CAMPAIGN_FILTERS, MESSAGE_STATUS, campaignConditions, eventWindow, messageStatusCondition } from '../conventions/campaign-filters.js';
import { wireId } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { int64, timestamp } from '../conventions/params.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { MAX_UINT64, itemId } from './item-id.js';

/**
 * /openinformation and /openinformation/{ID}: one record per opened message, from its first
 * open, read from the `open_info` read model (projections/open-information.ts). A record's `ID`
 * is its message's id, as in /bouncestatistics: the item path takes it (Mailjet's
 * `openinformation/{message_ID}`), so a listed record is found again at `/openinformation/{ID}`.
 *
 * Choices where the reference is silent:
 * - no implicit date window (projections/README.md, the numbers); FromTS/ToTS/Period keep their
 *   shared meaning (the campaign's send time); EventFromTs (inclusive) / EventToTs (exclusive)
 *   are on OpenedAt, the first open;
 * - `ArrivedAt` is the message's first `sent` (its message time when it has none; "" when the
 *   message has no delivery event yet);
 * - `UserAgentID` is the id of the parsed user agent (platform + client) of the first open, the
 *   same id /clickstatistics and /messagehistory give; `UserAgentFull` its raw text;
 * - Sort: `ID`, `OpenedAt` and `ArrivedAt`, both directions; the default order is by ID;
 * - a malformed item id is a 400 naming `ID`; an unknown one (or another tenant's) a 404.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  ...MESSAGE_STATUS,
  MessageID: int64().optional(),
  EventFromTs: timestamp('atOrAfter').optional().meta({ description: 'OpenedAt (first open) at or after this' }),
  EventToTs: timestamp('before').optional().meta({ description: 'OpenedAt (first open) before this' }),
});

const record = z.object({
  ArrivedAt: z.string(),
  CampaignID: z.number().int(),
  ContactID: z.number().int(),
  ID: z.number().int().meta({ description: 'The message id (one record per opened message)' }),
  MessageID: z.number().int().meta({ description: '64-bit message id' }),
  OpenedAt: z.string().meta({ description: 'First open' }),
  UserAgentFull: z.string(),
  UserAgentID: z.number().int(),
});

interface Row {
  message_id: string;
  campaign_id: bigint;
  contact_id: bigint;
  opened_at: bigint;
  arrived_at: bigint | null;
  user_agent_id: bigint;
  user_agent_full: string;
}

const COLUMNS = sql`t.message_id, t.campaign_id, t.contact_id, t.opened_at, t.arrived_at, t.user_agent_id, t.user_agent_full`;
/** The page's order by id: see `idOrder` for why it depends on the filters given. */
const byId = (filtered: boolean) => idOrder(sql.ref('t.message_id'), filtered);
const sortable = (filtered: boolean) => ({ ID: byId(filtered), OpenedAt: sql.ref('t.opened_at'), ArrivedAt: sql.ref('t.arrived_at') });

export const openinformationResource = defineResource({
  name: 'openinformation',
  description: 'Opened messages: one record per message, from its first open.',
  query,
  record,
  aliases: CAMPAIGN_FILTER_ALIASES,
  async list({ db, principal, query: q, page }) {
    // Filters an index answers; a message's status has none (see idOrder).
    const indexed = [
      ...campaignConditions(principal.apiKeyId, q, { perMessage: true }),
      ...(q.MessageID !== undefined ? [sql`t.message_id = ${q.MessageID.toString()}::numeric`] : []),
      ...eventWindow(sql.ref('t.opened_at'), q.EventFromTs, q.EventToTs),
    ];
    const filtered = indexed.length > 0;
    const where = [tenant(principal.apiKeyId, sql.ref('t.api_key_id')), ...indexed, ...messageStatusCondition(principal.apiKeyId, q.MessageStatus)];
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`open_info t`, key: sql`t.api_key_id, t.message_id`, columns: COLUMNS, where, orderBy: orderBy('openinformation', q.Sort, sortable(filtered), [byId(filtered)]) },
      page,
    );
    return { rows: rows.map(toWire), total };
  },
  items: [
    {
      path: ':id',
      description: 'The open information of one message (ID = the message id).',
      async find({ db, principal }, params) {
        const ID = itemId(params['id'] ?? '', 'ID', MAX_UINT64);
        if (ID === null) return [];
        const { rows } = await sql<Row>`SELECT ${COLUMNS} FROM open_info t
          WHERE ${tenant(principal.apiKeyId, sql.ref('t.api_key_id'))} AND t.message_id = ${ID.toString()}::numeric`.execute(db);
        return rows.map(toWire);
      },
    },
  ],
});


function toWire(r: Row): Record<string, unknown> {
  return {
    ArrivedAt: rfc3339(r.arrived_at),
    CampaignID: wireId(r.campaign_id),
    ContactID: wireId(r.contact_id),
    ID: wireId(r.message_id),
    MessageID: wireId(r.message_id),
    OpenedAt: rfc3339(r.opened_at),
    UserAgentFull: r.user_agent_full,
    UserAgentID: wireId(r.user_agent_id),
  };
}
