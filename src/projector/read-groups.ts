import { type Kysely, sql } from 'kysely';
import { compareText } from '../../projections/kit/text-order.js';
import type { Group, LogEvent } from '../../projections/kit/types.js';
import type { Database } from '../db/schema.js';
import type { EventType } from '../events/schema.js';

/**
 * Reading the log for projections: the columns a projection sees, group keys, and ranges of the
 * log for rebuilds (a live batch is read by `read-batch.ts`).
 */

/**
 * A recipient address as every projection sees it: its ASCII letters in lower case, so that
 * `Kay@X.org` and `kay@x.org` are one contact (as Mailjet's contacts are), the log keeping the
 * address as sent. `lower()` under `COLLATE "C"` folds ASCII letters only, the same on every
 * server whatever its locale (others' letters are kept as they are), on the live path, the fold's
 * and the SQL replay's alike.
 */
export const FOLDED_EMAIL_SQL = 'lower(email COLLATE "C")';
/** FOLDED_EMAIL_SQL in JavaScript (for folds fed without the projector's SQL: tests, tools). */
export const foldEmail = (email: string): string => email.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());

export const EVENT_COLUMNS_TEXT = `
  position, event_id, type, event_time, api_key_id::text AS api_key_id,
  coalesce(message_id::text, '') AS message_id,
  campaign_id::text AS campaign_id, contact_id::text AS contact_id, list_id::text AS list_id, sender_id::text AS sender_id,
  coalesce(${FOLDED_EMAIL_SQL}, '') AS email, coalesce(recipient_domain, '') AS recipient_domain, coalesce(esp, '') AS esp,
  coalesce(sender, '') AS sender, coalesce(sender_domain, '') AS sender_domain, coalesce(custom_campaign, '') AS custom_campaign,
  coalesce(url, '') AS url, coalesce(ua_platform, '') AS ua_platform, coalesce(ua_client, '') AS ua_client,
  CASE WHEN type = 'open' THEN coalesce(payload->>'agent', '') ELSE '' END AS agent,
  coalesce(geo, '') AS geo, coalesce(hard_bounce, false) AS hard_bounce, coalesce(blocked, false) AS blocked,
  coalesce(error_related_to, '') AS error_related_to, coalesce(error, '') AS error, state_id,
  CASE WHEN type = 'campaign' THEN payload END AS campaign_payload`;
const EVENT_COLUMNS = sql.raw(EVENT_COLUMNS_TEXT);

export interface EventSqlRow {
  position: bigint;
  event_id: string;
  type: EventType;
  event_time: bigint;
  api_key_id: string;
  message_id: string;
  campaign_id: string;
  contact_id: string;
  list_id: string;
  sender_id: string;
  email: string;
  recipient_domain: string;
  esp: string;
  sender: string;
  sender_domain: string;
  custom_campaign: string;
  url: string;
  ua_platform: string;
  ua_client: string;
  agent: string;
  geo: string;
  hard_bounce: boolean;
  blocked: boolean;
  error_related_to: string;
  error: string;
  state_id: number | null;
  campaign_payload: Record<string, unknown> | string | null;
}

export function toLogEvent(r: EventSqlRow): LogEvent {
  const payload = typeof r.campaign_payload === 'string' ? (JSON.parse(r.campaign_payload) as Record<string, unknown>) : r.campaign_payload;
  return {
    position: BigInt(r.position),
    eventId: r.event_id,
    type: r.type,
    time: Number(r.event_time),
    apiKeyId: r.api_key_id,
    messageId: r.message_id,
    campaignId: r.campaign_id,
    contactId: r.contact_id,
    listId: r.list_id,
    senderId: r.sender_id,
    email: r.email,
    recipientDomain: r.recipient_domain,
    esp: r.esp,
    sender: r.sender,
    senderDomain: r.sender_domain,
    customCampaign: r.custom_campaign,
    url: r.url,
    uaPlatform: r.ua_platform,
    uaClient: r.ua_client,
    agent: r.agent,
    geo: r.geo,
    hardBounce: r.hard_bounce,
    blocked: r.blocked,
    errorRelatedTo: r.error_related_to,
    error: r.error,
    stateId: r.state_id,
    campaignPayload: payload,
  };
}

export interface GroupKey {
  readonly kind: Group['kind'];
  readonly apiKeyId: string;
  readonly id: string;
}

export function groupKeyOf(e: { type: string; apiKeyId: string; messageId: string; campaignId: string }): GroupKey {
  return e.type === 'campaign' ? { kind: 'campaign', apiKeyId: e.apiKeyId, id: e.campaignId } : { kind: 'message', apiKeyId: e.apiKeyId, id: e.messageId };
}

export function groupKeyString(k: GroupKey): string {
  return `${k.kind === 'campaign' ? 'c' : 'm'}:${k.apiKeyId}:${k.id}`;
}

export function byTimeThenId(a: LogEvent, b: LogEvent): number {
  return a.time - b.time || compareText(a.eventId, b.eventId);
}

/** Events after `after` up to `upTo`, in position order, `limit` at a time (for rebuilds). */
export async function readEventRange(db: Kysely<Database>, after: bigint, upTo: bigint, limit: number, filter = ''): Promise<LogEvent[]> {
  const { rows } = await sql<EventSqlRow>`
    SELECT ${EVENT_COLUMNS} FROM events WHERE position > ${after} AND position <= ${upTo}${sql.raw(filter)} ORDER BY position LIMIT ${limit}`.execute(db);
  return rows.map(toLogEvent);
}

/**
 * SQL condition (with a leading AND) keeping the events of partition `index` of `count`: every
 * event of a group lands in the same partition, so a rebuild can fold one partition at a time.
 */
export function partitionFilter(index: number, count: number): string {
  if (count <= 1) return '';
  const group = "api_key_id::text || CASE WHEN type = 'campaign' THEN ':c' || campaign_id::text ELSE ':m' || coalesce(message_id::text, '') END";
  return ` AND (hashtext(${group}) & 2147483647) % ${count} = ${index}`;
}
