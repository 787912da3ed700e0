import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { wireId } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { idOrder, orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { readList, tenant } from '../list-query.js';
import { type RequestContext, defineResource } from '../resource.js';
import { itemId } from './item-id.js';
import { COUNT_SORTABLE, RECIPIENT_FILTERS, UNTRACKED_COUNT, countRecordFields, countsToWire, recipientConditions } from './recipient-counts.js';
import { foldedText } from '../conventions/folded-text.js';

/**
 * /contactstatistics — distinct-message counts per recipient, from `contact_stats`
 * (projections/contact-statistics.ts, one row per address; ContactID is the largest
 * mj_contact_id its messages carried, 0 when none did).
 * - Boolean filters: true = at least one such message, false = none. Hardbounced / Softbounced
 *   are the same parameters as HardBounced / SoftBounced (names match without regard to case).
 * - MinLastActivityAt and MaxLastActivityAt are both strict (greater than, less than), as the
 *   reference has them;
 *   LastActivityAt matches the exact second.
 * - MarketingContacts, UserMarketingContacts and WorkFlowExitedCount are always 0: contact lists
 *   and workflows are not in the event log.
 * - Item path: all digits = ContactID (every address carrying it), else an Email (exact, or
 *   without regard to case when nothing matches exactly).
 * - Sort: ID (= ContactID), LastActivityAt and every count (the untracked ones, always 0, too), both
 *   directions; ties by address.
 */

const query = listSchema(RECIPIENT_FILTERS);

const record = z.object({
  ...countRecordFields(),
  ContactID: z.number().int(),
  LastActivityAt: z.string().meta({ description: 'RFC 3339 UTC; "" for none' }),
  MarketingContacts: z.number().int().meta({ description: 'Always 0 (not tracked)' }),
  UserMarketingContacts: z.number().int().meta({ description: 'Always 0 (not tracked)' }),
  WorkFlowExitedCount: z.number().int().meta({ description: 'Always 0 (not tracked)' }),
});

interface Row {
  email: string;
  contact_id: bigint | null;
  last_activity_at: bigint | null;
  [column: string]: unknown;
}

/** The page's order by ContactID: see `idOrder` for why it depends on the filters given. */
const byId = (filtered: boolean) => idOrder(sql.ref('contact_id'), filtered);
const sortable = (filtered: boolean) => ({
  ID: byId(filtered),
  LastActivityAt: sql.ref('last_activity_at'),
  ...COUNT_SORTABLE,
  MarketingContacts: UNTRACKED_COUNT,
  UserMarketingContacts: UNTRACKED_COUNT,
  WorkFlowExitedCount: UNTRACKED_COUNT,
});
const tieBreak = (filtered: boolean) => [byId(filtered), sql`email`];
/** A row only named by messages counted under another address is not listed (projections/contact-statistics.ts). */
const COUNTS_A_MESSAGE = sql`messages > 0`;

export const contactstatisticsResource = defineResource({
  name: 'contactstatistics',
  unsupported: { Recalculate: 'undocumented; the counts are always current', IncludeAnonymized: 'undocumented' },
  description: 'Distinct-message counts per contact (recipient address).',
  query,
  record,
  async list({ db, principal, query: q, page }) {
    const { indexed, unindexed } = recipientConditions(q);
    const filtered = indexed.length > 0;
    const order = orderBy('contactstatistics', q.Sort, sortable(filtered), tieBreak(filtered));
    const where = [tenant(principal.apiKeyId), COUNTS_A_MESSAGE, ...indexed, ...unindexed];
    const { rows, total } = await readList<Row>(db, { from: sql`contact_stats`, key: sql`api_key_id, email`, columns: sql`*`, where, orderBy: order }, page);
    return { rows: rows.map(toWire), total };
  },
  items: [
    {
      path: ':id',
      description: 'Statistics of one contact, by ContactID (digits) or Email.',
      find: async (ctx, params) => (await findContact(ctx, params['id'] ?? '')).map(toWire),
    },
  ],
});

async function findContact({ db, principal }: RequestContext, key: string): Promise<Row[]> {
  const read = async (match: RawBuilder<unknown>) =>
    (await sql<Row>`SELECT * FROM contact_stats WHERE ${tenant(principal.apiKeyId)} AND ${COUNTS_A_MESSAGE} AND ${match} ORDER BY email`.execute(db)).rows;
  if (/^\d+$/.test(key)) {
    const id = itemId(key, 'ContactID');
    return id === null || id === 0n ? [] : read(sql`contact_id = ${id.toString()}::int8`);
  }
  if (key.includes('\u0000')) return []; // no stored address has one (and Postgres text cannot)
  const exact = await read(sql`email = ${key}`);
  return exact.length > 0 ? exact : read(sql`lower(email) = ${foldedText(key)}`);
}

function toWire(r: Row): Record<string, unknown> {
  const counts = countsToWire(r);
  return {
    BlockedCount: counts.BlockedCount,
    BouncedCount: counts.BouncedCount,
    ClickedCount: counts.ClickedCount,
    ContactID: wireId(r.contact_id),
    DeferredCount: counts.DeferredCount,
    DeliveredCount: counts.DeliveredCount,
    HardbouncedCount: counts.HardbouncedCount,
    LastActivityAt: r.last_activity_at === null || r.last_activity_at === 0n ? '' : rfc3339(r.last_activity_at),
    MarketingContacts: 0,
    OpenedCount: counts.OpenedCount,
    ProcessedCount: counts.ProcessedCount,
    QueuedCount: counts.QueuedCount,
    SoftbouncedCount: counts.SoftbouncedCount,
    SpamComplaintCount: counts.SpamComplaintCount,
    UnsubscribedCount: counts.UnsubscribedCount,
    UserMarketingContacts: 0,
    WorkFlowExitedCount: 0,
  };
}
