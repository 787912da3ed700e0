import { type RawBuilder, sql } from 'kysely';
import { apiErrors } from '../../http/errors.js';
import { bool, int, int64, oneOf, text, timestamp } from './params.js';
import { foldedText } from './folded-text.js';

/**
 * Mailjet's shared "campaign filter" block (bouncestatistics, clickstatistics, openinformation,
 * toplinkclicked, useragentstatistics, geostatistics): parameters and the SQL conditions they
 * become over a read model carrying the message dimensions (campaign_id, list_id, sender_id,
 * sender, sender_domain, custom_campaign). Campaign-level filters (send time, flags, status)
 * look the campaign up in the campaign-overview read model.
 */

export const CAMPAIGN_FILTERS = {
  CampaignID: int64({ signed: true }).optional(),
  CampaignStatus: int(-3, 4).optional().meta({ description: 'Campaign status: -3 AXCanceled, -2 Deleted, -1 Archived, 0 Draft, 1 Programmed, 2 Sent, 3 AXTested, 4 AXSelected' }),
  ContactsList: int64({ signed: true }).optional(),
  CustomCampaign: text().optional(),
  From: text().optional().meta({ description: 'Sender address' }),
  FromDomain: text().optional(),
  FromID: int64({ signed: true }).optional().meta({ description: 'Sender id' }),
  FromType: int(1, 3).optional().meta({ description: '1 Transactional (no campaign metadata), 2 Marketing (campaign metadata known), 3 Unknown (no campaign)' }),
  FromTS: timestamp('atOrAfter').optional().meta({ description: 'Campaign send time at or after this' }),
  ToTS: timestamp('before').optional().meta({ description: 'Campaign send time before this' }),
  IsDeleted: bool().optional(),
  IsNewsletterTool: bool().optional().meta({ description: 'Campaigns built in the newsletter tool (IDType NL)' }),
  IsStarred: bool().optional(),
  Period: oneOf(['Day', 'Week', 'Month', 'Year']).optional().meta({ description: 'Campaign send time within the current day / week / month / year (UTC)' }),
} as const;

/** `MessageStatus` (message-event resources only; node-mailjet's codes). */
export const MESSAGE_STATUS = { MessageStatus: int(0, 11).optional().meta({ description: '0 Processed, 1 Queued, 2 Sent, 3 Opened, 4 Clicked, 5 Bounce, 6 Spam, 7 Unsub, 8 Blocked, 9 SoftBounce, 10 HardBounce, 11 Deferred' }) } as const;

/** Lowercase aliases: `ContactsListID` (OpenAPI's spelling) and `MessageStatusID` (2015 metadata). */
export const CAMPAIGN_FILTER_ALIASES: Readonly<Record<string, string>> = { contactslistid: 'contactslist', messagestatusid: 'messagestatus' };

export interface CampaignFilterValues {
  CampaignID?: bigint | undefined;
  CampaignStatus?: number | undefined;
  ContactsList?: bigint | undefined;
  CustomCampaign?: string | undefined;
  From?: string | undefined;
  FromDomain?: string | undefined;
  FromID?: bigint | undefined;
  FromType?: number | undefined;
  FromTS?: number | undefined;
  ToTS?: number | undefined;
  IsDeleted?: boolean | undefined;
  IsNewsletterTool?: boolean | undefined;
  IsStarred?: boolean | undefined;
  Period?: 'Day' | 'Week' | 'Month' | 'Year' | undefined;
}

/** How `campaignConditions` treats a table's rows. */
export interface CampaignConditionOptions {
  /**
   * The table has one row per message (`t.message_id`): a message sent without a campaign is
   * placed in FromTS/ToTS/Period by its own time (the messages read model's), there being no
   * campaign send time to go by. Without it (tables that count campaign-less messages together,
   * with no time of their own), such rows cannot be placed in a window and a time filter leaves
   * them out.
   */
  readonly perMessage?: boolean;
}

/**
 * Conditions for the given filters on a table (alias `t`) with the dimension columns. Every
 * campaign lookup is scoped to the tenant.
 *
 * The campaign-level filters (send time, status, flags) select campaigns; a message sent
 * without one (`campaign_id` 0) has no campaign to look up. For it, a flag asked to be false
 * holds (it is in no deleted, starred or newsletter-tool campaign), a flag asked to be true and
 * any `CampaignStatus` do not, and a time window holds when the message's own time is in it
 * (see `perMessage`).
 */
export function campaignConditions(apiKeyId: string, q: CampaignFilterValues, options: CampaignConditionOptions = {}): RawBuilder<unknown>[] {
  const c: RawBuilder<unknown>[] = [];
  if (q.CampaignID !== undefined) c.push(sql`t.campaign_id = ${q.CampaignID.toString()}::int8`);
  if (q.ContactsList !== undefined) c.push(sql`t.list_id = ${q.ContactsList.toString()}::int8`);
  if (q.FromID !== undefined) c.push(sql`t.sender_id = ${q.FromID.toString()}::int8`);
  if (q.CustomCampaign !== undefined) c.push(sql`t.custom_campaign = ${q.CustomCampaign}`);
  if (q.From !== undefined) c.push(sql`lower(t.sender) = ${foldedText(q.From)}`);
  if (q.FromDomain !== undefined) c.push(sql`t.sender_domain = ${q.FromDomain.toLowerCase()}`);
  // A set of campaigns is looked up first and matched as an array (`= ANY(ARRAY(…))`, computed
  // once): the table's (tenant, campaign) index then finds their rows, where `IN (SELECT …)` or
  // a correlated EXISTS read every row of the tenant.
  if (q.FromType !== undefined) {
    if (q.FromType === 3) c.push(sql`t.campaign_id = 0`);
    else if (q.FromType === 2) c.push(sql`t.campaign_id = ANY(ARRAY(SELECT m.campaign_id FROM campaigns m WHERE m.api_key_id = ${apiKeyId}::int8 AND m.campaign_id <> 0))`);
    else {
      c.push(sql`t.campaign_id = ANY(ARRAY(SELECT s.campaign_id FROM campaign_stats s WHERE s.api_key_id = ${apiKeyId}::int8 AND s.campaign_id <> 0
        AND NOT EXISTS (SELECT 1 FROM campaigns m WHERE m.api_key_id = s.api_key_id AND m.campaign_id = s.campaign_id)))`);
    }
  }

  // Campaign-level: which campaigns qualify, from the campaign-overview read model.
  const campaign: RawBuilder<unknown>[] = [];
  // Whether a message without a campaign can qualify at all (see above).
  let campaignless = true;
  const sendTime = sql`COALESCE(m.send_time_start, s.first_message_time)`;
  let from = q.FromTS;
  let to = q.ToTS;
  if (q.Period !== undefined) {
    if (from !== undefined || to !== undefined) throw apiErrors.badRequest('Invalid parameter Period: give either Period or FromTS/ToTS, not both');
    const now = Math.floor(Date.now() / 1000);
    from = periodStart(q.Period, now);
    to = now + 1;
  }
  if (from !== undefined && to !== undefined && to <= from) throw apiErrors.badRequest('Invalid parameter ToTS: must be later than FromTS');
  if (from !== undefined) campaign.push(sql`${sendTime} >= ${from}::int8`);
  if (to !== undefined) campaign.push(sql`${sendTime} < ${to}::int8`);
  // A campaign with messages but no metadata counts as sent (2), as /campaignoverview shows it.
  if (q.CampaignStatus !== undefined) {
    campaign.push(sql`COALESCE(m.status, 2) = ${q.CampaignStatus}`);
    campaignless = false;
  }
  if (q.IsDeleted !== undefined) campaign.push(q.IsDeleted ? sql`m.status = -2` : sql`m.status IS DISTINCT FROM -2`);
  if (q.IsStarred !== undefined) campaign.push(q.IsStarred ? sql`m.starred IS TRUE` : sql`m.starred IS NOT TRUE`);
  if (q.IsNewsletterTool !== undefined) campaign.push(q.IsNewsletterTool ? sql`m.id_type = 'NL'` : sql`m.id_type IS DISTINCT FROM 'NL'`);
  if (q.IsDeleted === true || q.IsStarred === true || q.IsNewsletterTool === true) campaignless = false;
  if (campaign.length === 0) return c;

  const campaigns = sql`t.campaign_id = ANY(ARRAY(
      SELECT s.campaign_id FROM campaign_stats s
      LEFT JOIN campaigns m ON m.api_key_id = s.api_key_id AND m.campaign_id = s.campaign_id
      WHERE s.api_key_id = ${apiKeyId}::int8 AND s.messages > 0 AND ${sql.join(campaign, sql` AND `)}))`;
  const window = from !== undefined || to !== undefined;
  if (!campaignless || (window && options.perMessage !== true)) c.push(campaigns);
  else if (!window) c.push(sql`(t.campaign_id = 0 OR ${campaigns})`);
  else {
    const messageTime = [...(from !== undefined ? [sql`g.message_time >= ${from}::int8`] : []), ...(to !== undefined ? [sql`g.message_time < ${to}::int8`] : [])];
    // The campaign-less messages of the window, as an array too (through the messages'
    // (tenant, campaign, time) index): each arm of the OR then has an index of its own.
    c.push(sql`(${campaigns} OR t.campaign_id = 0 AND t.message_id = ANY(ARRAY(
      SELECT g.message_id FROM messages g WHERE g.api_key_id = ${apiKeyId}::int8 AND g.campaign_id = 0 AND ${sql.join(messageTime, sql` AND `)})))`);
  }
  return c;
}

/** EventFromTs (inclusive) / EventToTs (exclusive) on an event-time column. */
export function eventWindow(column: RawBuilder<unknown>, from: number | undefined, to: number | undefined): RawBuilder<unknown>[] {
  if (from !== undefined && to !== undefined && to <= from) throw apiErrors.badRequest('Invalid parameter EventToTs: must be later than EventFromTs');
  return [...(from !== undefined ? [sql`${column} >= ${from}::int8`] : []), ...(to !== undefined ? [sql`${column} < ${to}::int8`] : [])];
}

/** Where `messageStatusCondition` finds a row's status. */
export interface MessageStatusOptions {
  /**
   * The table is the messages read model itself: the condition tests the row's own columns. An
   * EXISTS on `messages` there joined the table to itself, which the planner answered by reading
   * the whole table (every tenant's messages) beside the tenant's: 286k rows for a count of 69k.
   */
  readonly onMessages?: boolean;
}

/** `MessageStatus` → a condition on the messages read model, for a table with `t.message_id`. */
export function messageStatusCondition(apiKeyId: string, code: number | undefined, options: MessageStatusOptions = {}): RawBuilder<unknown>[] {
  if (code === undefined) return [];
  const statuses: Record<number, readonly string[]> = {
    1: ['queued'], 2: ['sent'], 3: ['opened'], 4: ['clicked'], 5: ['softbounced', 'hardbounced'], 6: ['spam'],
    7: ['unsub'], 8: ['blocked'], 9: ['softbounced'], 10: ['hardbounced'], 11: ['deferred'],
  };
  const match = (row: string) =>
    code === 0 ? sql`${sql.ref(`${row}.message_time`)} IS NOT NULL` : sql`${sql.ref(`${row}.status`)} = ANY(${[...(statuses[code] ?? [])]}::text[])`;
  // `t` is the tenant's message with that id itself (the key is the tenant and the id).
  if (options.onMessages === true) return [match('t')];
  return [sql`EXISTS (SELECT 1 FROM messages g WHERE g.api_key_id = ${apiKeyId}::int8 AND g.message_id = t.message_id AND ${match('g')})`];
}

function periodStart(period: 'Day' | 'Week' | 'Month' | 'Year', now: number): number {
  const d = new Date(now * 1000);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  switch (period) {
    case 'Day':
      return Date.UTC(y, m, d.getUTCDate()) / 1000;
    case 'Week': // ISO weeks start on Monday
      return Date.UTC(y, m, d.getUTCDate() - ((d.getUTCDay() + 6) % 7)) / 1000;
    case 'Month':
      return Date.UTC(y, m, 1) / 1000;
    case 'Year':
      return Date.UTC(y, 0, 1) / 1000;
  }
}
