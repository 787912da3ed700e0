import { sql } from 'kysely';
import { z } from 'zod';
import { wireId } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { bool, int64, parseQuery, timestamp, utcOnly } from '../conventions/params.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { conditions, readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { itemId } from './item-id.js';
import { COUNT_SORTABLE, RECIPIENT_FILTERS, UNTRACKED_COUNT, countRecordFields, countsToWire, recipientConditions } from './recipient-counts.js';

/**
 * /listrecipientstatistics — distinct-message counts per (contact list, recipient address) for
 * messages sent to a list, from `list_recipient_stats` (projections/list-recipient-statistics.ts;
 * ListRecipientID is a stable id of tenant + list + address).
 * - Count filters and LastActivityAt filters as in /contactstatistics (Min and Max both strict).
 * - IsUnsubscribed: true = the recipient unsubscribed from a message sent to this list (unsub
 *   count > 0); IsActive is its negation (still subscribed, as far as the events tell).
 * - MinUnsubscribedAt / MaxUnsubscribedAt: on the first unsubscribe, [Min, Max).
 * - IsExcludedFromCampaigns: exclusions are not in the event log, so true matches nothing and
 *   false everything.
 * - ShowExtraData (list and item): adds `Data`, the contact's extra data, which the event log
 *   does not carry: always an empty list.
 * - PreQueuedCount and WorkFlowExitedCount are always 0 (not tracked).
 * - TimeZone (undocumented, in node-mailjet's types): UTC by any of its names; another zone is a
 *   400, as times here are UTC only.
 * - Sort: ID (= ListRecipientID), ProcessedCount, Email, LastActivityAt and every count (the
 *   untracked ones, always 0, too).
 */

const query = listSchema({
  ...RECIPIENT_FILTERS,
  Contact: int64({ signed: true }).optional().meta({ description: 'Contact id' }),
  ContactsList: int64({ signed: true }).optional().meta({ description: 'Contact list id' }),
  IsActive: bool().optional().meta({ description: 'true: never unsubscribed from this list' }),
  IsUnsubscribed: bool().optional().meta({ description: 'true: unsubscribed from this list' }),
  IsExcludedFromCampaigns: bool().optional().meta({ description: 'Not tracked: true matches nothing' }),
  MinUnsubscribedAt: timestamp('atOrAfter').optional().meta({ description: 'First unsubscribe at or after this' }),
  MaxUnsubscribedAt: timestamp('before').optional().meta({ description: 'First unsubscribe before this' }),
  ShowExtraData: bool().optional().meta({ description: 'Add the contact extra data (`Data`, always empty here)' }),
  TimeZone: utcOnly().optional().meta({ description: 'Undocumented (node-mailjet sends it): UTC only, as every time here is; another zone is a 400' }),
});
const ITEM_QUERY = query.pick({ ShowExtraData: true });

const record = z.object({
  ...countRecordFields(),
  Data: z.array(z.object({ Name: z.string(), Value: z.string() })).optional().meta({ description: 'Only with ShowExtraData; always empty' }),
  LastActivityAt: z.string().meta({ description: 'RFC 3339 UTC; "" for none' }),
  ListRecipientID: z.number().int(),
  PreQueuedCount: z.number().int().meta({ description: 'Always 0 (not tracked)' }),
  WorkFlowExitedCount: z.number().int().meta({ description: 'Always 0 (not tracked)' }),
});

interface Row {
  list_recipient_id: bigint | null;
  last_activity_at: bigint | null;
  [column: string]: unknown;
}

/** The page's order by ListRecipientID: see `idOrder` for why it depends on the filters given. */
const byId = (filtered: boolean) => idOrder(sql.ref('list_recipient_id'), filtered);
const sortable = (filtered: boolean) => ({
  ID: byId(filtered),
  Email: sql.ref('email'),
  LastActivityAt: sql.ref('last_activity_at'),
  ...COUNT_SORTABLE,
  PreQueuedCount: UNTRACKED_COUNT,
  WorkFlowExitedCount: UNTRACKED_COUNT,
});
const tieBreak = (filtered: boolean) => [byId(filtered), sql`list_id`, sql`email`];
/** A row only named by messages counted under another list or address is not listed (projections/list-recipient-statistics.ts). */
const COUNTS_A_MESSAGE = sql`messages > 0`;

export const listrecipientstatisticsResource = defineResource({
  name: 'listrecipientstatistics',
  description: 'Distinct-message counts per contact-list recipient.',
  query,
  record,
  aliases: { contactid: 'contact', contactslistid: 'contactslist' },
  unsupported: { DateFormat: 'undocumented; times are RFC 3339' },
  async list({ db, principal, query: q, page }) {
    const recipient = recipientConditions(q);
    // Filters an index answers (the key's list, the contact's and the times' indexes) and those
    // none does (the counts; IsExcludedFromCampaigns is a constant): see idOrder.
    const indexed = [
      ...recipient.indexed,
      ...conditions([
        [q.Contact, () => sql`contact_id = ${String(q.Contact)}::int8`],
        [q.ContactsList, () => sql`list_id = ${String(q.ContactsList)}::int8`],
        [q.MinUnsubscribedAt, () => sql`unsubscribed_at >= ${q.MinUnsubscribedAt}::int8`],
        [q.MaxUnsubscribedAt, () => sql`unsubscribed_at < ${q.MaxUnsubscribedAt}::int8`],
      ]),
    ];
    const unindexed = [
      ...recipient.unindexed,
      ...conditions([
        [q.IsUnsubscribed, () => (q.IsUnsubscribed === true ? sql`unsub > 0` : sql`unsub = 0`)],
        [q.IsActive, () => (q.IsActive === true ? sql`unsub = 0` : sql`unsub > 0`)],
        [q.IsExcludedFromCampaigns, () => (q.IsExcludedFromCampaigns === true ? sql`FALSE` : sql`TRUE`)],
      ]),
    ];
    const filtered = indexed.length > 0;
    const where = [tenant(principal.apiKeyId), COUNTS_A_MESSAGE, ...indexed, ...unindexed];
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`list_recipient_stats`, key: sql`api_key_id, list_id, email`, columns: sql`*`, where, orderBy: orderBy('listrecipientstatistics', q.Sort, sortable(filtered), tieBreak(filtered)) },
      page,
    );
    return { rows: rows.map((r) => toWire(r, q.ShowExtraData === true)), total };
  },
  items: [
    {
      path: ':id',
      description: 'Statistics of one list recipient, by ListRecipientID.',
      query: ITEM_QUERY,
      async find({ db, principal, rawQuery }, params) {
        const id = itemId(params['id'] ?? '', 'ListRecipientID');
        const q = parseQuery(ITEM_QUERY, rawQuery);
        if (id === null) return [];
        const r = await sql<Row>`SELECT * FROM list_recipient_stats WHERE ${tenant(principal.apiKeyId)} AND ${COUNTS_A_MESSAGE} AND list_recipient_id = ${id.toString()}::int8 ORDER BY list_id, email`.execute(db);
        return r.rows.map((row) => toWire(row, q.ShowExtraData === true));
      },
    },
  ],
});

function toWire(r: Row, extraData: boolean): Record<string, unknown> {
  const counts = countsToWire(r);
  return {
    BlockedCount: counts.BlockedCount,
    BouncedCount: counts.BouncedCount,
    ClickedCount: counts.ClickedCount,
    ...(extraData ? { Data: [] } : {}),
    DeferredCount: counts.DeferredCount,
    DeliveredCount: counts.DeliveredCount,
    HardbouncedCount: counts.HardbouncedCount,
    LastActivityAt: r.last_activity_at === null || r.last_activity_at === 0n ? '' : rfc3339(r.last_activity_at),
    ListRecipientID: wireId(r.list_recipient_id),
    OpenedCount: counts.OpenedCount,
    PreQueuedCount: 0,
    ProcessedCount: counts.ProcessedCount,
    QueuedCount: counts.QueuedCount,
    SoftbouncedCount: counts.SoftbouncedCount,
    SpamComplaintCount: counts.SpamComplaintCount,
    UnsubscribedCount: counts.UnsubscribedCount,
    WorkFlowExitedCount: 0,
  };
}
