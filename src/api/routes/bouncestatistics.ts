import { sql } from 'kysely';
import { z } from 'zod';
import { CAMPAIGN_FILTER_ALIASES, CAMPAIGN_FILTERS, MESSAGE_STATUS, campaignConditions, eventWindow, messageStatusCondition } from '../conventions/campaign-filters.js';
import { wireId } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { timestamp } from '../conventions/params.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { MAX_UINT64, itemId } from './item-id.js';

/**
 * /bouncestatistics and /bouncestatistics/{ID}: one record per bounce event, from the
 * `bounce_stats` read model (projections/bounce-statistics.ts). `ID` is the message id, so the
 * item form answers every bounce of that message (oldest first).
 *
 * Choices where the reference is silent:
 * - no implicit date window (projections/README.md, the numbers): without
 *   FromTS/ToTS/Period/EventFromTs every bounce is listed; FromTS/ToTS/Period keep their shared
 *   meaning (the campaign's send time);
 * - EventFromTs is inclusive and EventToTs exclusive, on BouncedAt, like FromTS/ToTS;
 * - `StateID` is 0 when the bounce's error text matches no Mailjet message state;
 * - Sort: `ID` (the message id) and `BouncedAt`, both directions; the default order is by ID,
 *   then the bounce's position in the log;
 * - a malformed item id is a 400 naming `ID`; an unknown one (or another tenant's) a 404.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  ...MESSAGE_STATUS,
  EventFromTs: timestamp('atOrAfter').optional().meta({ description: 'BouncedAt at or after this' }),
  EventToTs: timestamp('before').optional().meta({ description: 'BouncedAt before this' }),
});

const record = z.object({
  BouncedAt: z.string(),
  CampaignID: z.number().int(),
  ContactID: z.number().int(),
  ID: z.number().int().meta({ description: 'The message id (64-bit)' }),
  IsBlocked: z.boolean(),
  IsStatePermanent: z.boolean(),
  StateID: z.number().int().meta({ description: 'Message state (see /messagestate); 0 when unknown' }),
});

interface Row {
  message_id: string;
  campaign_id: bigint;
  contact_id: bigint;
  bounced_at: bigint;
  is_blocked: boolean;
  is_state_permanent: boolean;
  state_id: number | null;
}

const COLUMNS = sql`t.message_id, t.campaign_id, t.contact_id, t.bounced_at, t.is_blocked, t.is_state_permanent, t.state_id`;
/** The page's order by id: see `idOrder` for why it depends on the filters given. */
const byId = (filtered: boolean) => idOrder(sql.ref('t.message_id'), filtered);
const sortable = (filtered: boolean) => ({ ID: byId(filtered), BouncedAt: sql.ref('t.bounced_at') });
const tieBreak = (filtered: boolean) => [byId(filtered), sql`t.id`];

export const bouncestatisticsResource = defineResource({
  name: 'bouncestatistics',
  description: 'Bounce events: one record per bounce, with the message id as ID.',
  query,
  record,
  aliases: CAMPAIGN_FILTER_ALIASES,
  async list({ db, principal, query: q, page }) {
    // Filters an index answers; a message's status has none (see idOrder).
    const indexed = [
      ...campaignConditions(principal.apiKeyId, q, { perMessage: true }),
      ...eventWindow(sql.ref('t.bounced_at'), q.EventFromTs, q.EventToTs),
    ];
    const filtered = indexed.length > 0;
    const where = [tenant(principal.apiKeyId, sql.ref('t.api_key_id')), ...indexed, ...messageStatusCondition(principal.apiKeyId, q.MessageStatus)];
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`bounce_stats t`, key: sql`t.api_key_id, t.id`, columns: COLUMNS, where, orderBy: orderBy('bouncestatistics', q.Sort, sortable(filtered), tieBreak(filtered)) },
      page,
    );
    return { rows: rows.map(toWire), total };
  },
  items: [
    {
      path: ':id',
      description: 'Every bounce of one message (ID = the message id), oldest first.',
      async find({ db, principal }, params) {
        const ID = itemId(params['id'] ?? '', 'ID', MAX_UINT64);
        if (ID === null) return [];
        const { rows } = await sql<Row>`SELECT ${COLUMNS} FROM bounce_stats t
          WHERE ${tenant(principal.apiKeyId, sql.ref('t.api_key_id'))} AND t.message_id = ${ID.toString()}::numeric
          ORDER BY t.bounced_at, t.id`.execute(db);
        return rows.map(toWire);
      },
    },
  ],
});


function toWire(r: Row): Record<string, unknown> {
  return {
    BouncedAt: rfc3339(r.bounced_at),
    CampaignID: wireId(r.campaign_id),
    ContactID: wireId(r.contact_id),
    ID: wireId(r.message_id),
    IsBlocked: r.is_blocked,
    IsStatePermanent: r.is_state_permanent,
    StateID: r.state_id ?? 0,
  };
}
