import { sql } from 'kysely';
import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { int64, list, text } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { conditions, readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';

/**
 * /statistics/recipient-esp — distinct-message counts per recipient ESP for one campaign
 * (CampaignID required), from `recipient_esp_stats` (projections/recipient-esp.ts), and the
 * rates, rounded to 4 decimals (0 when the denominator is 0): open = opened / attempted,
 * click-through = clicked / opened, soft / hard bounce and deferred = / attempted, unsubscribed
 * and spam = / delivered. Attempted = processed and not blocked. A rate's numerator counts only
 * its denominator's messages (opened and attempted, clicked and opened, …), so a rate is a share
 * of them and never above 1: an open before its `sent` arrived, or a click with no open, shows in
 * the counts but not in the rates.
 * - EspNames (also ESP_Name): one name or a comma list, without regard to case.
 * - Sort (none in Mailjet's metadata): ESPName (default), the counts and the rates.
 * - Keys in the order of Mailjet's documented sample.
 */

const query = listSchema({
  CampaignID: int64({ signed: true }).optional().meta({ description: 'Required: the campaign' }),
  EspNames: list(text(100)).optional().meta({ description: 'ESP names (Gmail, Outlook, Yahoo, Apple, …, others), comma-separated' }),
});

const COUNTS = {
  DeliveredMessagesCount: 'delivered',
  AttemptedMessagesCount: 'attempted',
  OpenedMessagesCount: 'opened',
  ClickedMessagesCount: 'clicked',
  DeferredMessagesCount: 'deferred',
  SoftBouncedMessagesCount: 'soft_bounced',
  HardBouncedMessagesCount: 'hard_bounced',
  UnsubscribedMessagesCount: 'unsub',
  SpamReportsCount: 'spam',
} as const;
type Column = (typeof COUNTS)[keyof typeof COUNTS];

/** Rate → [numerator (among the denominator's messages), denominator]. */
const RATES = {
  OpenRate: ['opened_of_attempted', 'attempted'],
  ClickThroughRate: ['clicked_of_opened', 'opened'],
  SoftBouncedRate: ['soft_bounced_of_attempted', 'attempted'],
  HardBouncedRate: ['hard_bounced_of_attempted', 'attempted'],
  UnsubscribedRate: ['unsub_of_delivered', 'delivered'],
  SpamReportsRate: ['spam_of_delivered', 'delivered'],
  DeferredRate: ['deferred_of_attempted', 'attempted'],
} as const satisfies Record<string, readonly [string, Column]>;
type RateColumn = (typeof RATES)[keyof typeof RATES][0];

const record = z.object({
  ESPName: z.string(),
  ...Object.fromEntries(Object.keys(COUNTS).map((k) => [k, z.number().int()])),
  ...Object.fromEntries(Object.keys(RATES).map((k) => [k, z.number().meta({ description: 'Fraction, 4 decimals' })])),
});

type Row = { esp: string } & Record<Column | RateColumn, bigint>;

const SORTABLE = {
  ESPName: sql.ref('esp'),
  ...Object.fromEntries(Object.entries(COUNTS).map(([wire, column]) => [wire, sql.ref(column)])),
  // Each rate as `rate` below computes it (0 without a denominator), so the order is the one shown.
  ...Object.fromEntries(Object.entries(RATES).map(([wire, [num, den]]) => [wire, sql`CASE WHEN ${sql.ref(den)} = 0 THEN 0 ELSE round(${sql.ref(num)}::numeric / ${sql.ref(den)}, 4) END`])),
};

export const statisticsRecipientEspResource = defineResource({
  name: 'statistics/recipient-esp',
  description: 'Delivery and engagement per recipient ESP (mailbox provider) for a campaign.',
  query,
  record,
  aliases: { esp_name: 'espnames', espname: 'espnames' },
  async list({ db, principal, query: q, page }) {
    if (q.CampaignID === undefined) throw apiErrors.badRequest('Missing parameter CampaignID: You must provide a CampaignID');
    const where = [
      tenant(principal.apiKeyId),
      sql`campaign_id = ${q.CampaignID.toString()}::int8`,
      ...conditions([[q.EspNames, () => sql`lower(esp) = ANY(${(q.EspNames ?? []).map((n) => n.toLowerCase())}::text[])`]]),
    ];
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`recipient_esp_stats`, columns: sql`*`, where, orderBy: orderBy('statistics/recipient-esp', q.Sort, SORTABLE, [sql`esp`]) },
      page,
    );
    return { rows: rows.map(toWire), total };
  },
});

const rate = (numerator: number, denominator: number): number => (denominator === 0 ? 0 : Math.round((numerator / denominator) * 10_000) / 10_000);

function toWire(r: Row): Record<string, unknown> {
  const out: Record<string, unknown> = { ESPName: r.esp };
  for (const [wire, column] of Object.entries(COUNTS) as [string, Column][]) out[wire] = wireInt(r[column]);
  for (const [wire, [num, den]] of Object.entries(RATES)) out[wire] = rate(wireInt(r[num]), wireInt(r[den]));
  return out;
}
