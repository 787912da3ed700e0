import { type Kysely, sql } from 'kysely';
import type { Group, LogEvent } from '../../projections/kit/types.js';
import type { Database } from '../db/schema.js';
import type { EventType } from '../events/schema.js';

/** Reading the log for projections: which groups a batch touches, and every event of those groups. */

const EVENT_COLUMNS = sql.raw(`
  position, event_id, type, event_time, api_key_id::text AS api_key_id,
  coalesce(message_id::text, '') AS message_id,
  campaign_id::text AS campaign_id, contact_id::text AS contact_id, list_id::text AS list_id, sender_id::text AS sender_id,
  coalesce(email, '') AS email, coalesce(recipient_domain, '') AS recipient_domain, coalesce(esp, '') AS esp,
  coalesce(sender, '') AS sender, coalesce(sender_domain, '') AS sender_domain, coalesce(custom_campaign, '') AS custom_campaign,
  coalesce(url, '') AS url, coalesce(ua_platform, '') AS ua_platform, coalesce(ua_client, '') AS ua_client,
  CASE WHEN type = 'open' THEN coalesce(payload->>'agent', '') ELSE '' END AS agent,
  coalesce(geo, '') AS geo, coalesce(hard_bounce, false) AS hard_bounce, coalesce(blocked, false) AS blocked,
  coalesce(error_related_to, '') AS error_related_to, coalesce(error, '') AS error, state_id,
  CASE WHEN type = 'campaign' THEN payload END AS campaign_payload`);

interface EventSqlRow {
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

/** The group keys of the events after `after` (at most `limit` events), how many there were, and the last position read. */
export async function readBatchGroups(db: Kysely<Database>, after: bigint, limit: number): Promise<{ last: bigint; events: number; keys: GroupKey[] } | null> {
  const { rows } = await sql<{ position: bigint; type: string; api_key_id: string; message_id: string; campaign_id: string }>`
    SELECT position, type, api_key_id::text AS api_key_id, coalesce(message_id::text, '') AS message_id, campaign_id::text AS campaign_id
    FROM events WHERE position > ${after} ORDER BY position LIMIT ${limit}`.execute(db);
  const lastRow = rows.at(-1);
  if (lastRow === undefined) return null;
  const keys = new Map<string, GroupKey>();
  for (const r of rows) {
    const k = groupKeyOf({ type: r.type, apiKeyId: r.api_key_id, messageId: r.message_id, campaignId: r.campaign_id });
    keys.set(groupKeyString(k), k);
  }
  return { last: BigInt(lastRow.position), events: rows.length, keys: [...keys.values()] };
}

/** Every event of the given groups up to `upTo`, grouped and sorted by (time, EventID). */
export async function fetchGroups(db: Kysely<Database>, keys: readonly GroupKey[], upTo: bigint): Promise<Map<string, LogEvent[]>> {
  const messages = keys.filter((k) => k.kind === 'message').map((k) => ({ a: k.apiKeyId, m: k.id }));
  const campaigns = keys.filter((k) => k.kind === 'campaign').map((k) => ({ a: k.apiKeyId, c: k.id }));
  const groups = new Map<string, LogEvent[]>();
  const collect = (rows: EventSqlRow[]) => {
    for (const r of rows) {
      const e = toLogEvent(r);
      const key = groupKeyString(groupKeyOf(e));
      let list = groups.get(key);
      if (list === undefined) groups.set(key, (list = []));
      list.push(e);
    }
  };
  if (messages.length > 0) {
    const { rows } = await sql<EventSqlRow>`
      SELECT ${EVENT_COLUMNS} FROM events
      JOIN json_to_recordset(${JSON.stringify(messages)}) AS k(a bigint, m numeric(20,0)) ON events.api_key_id = k.a AND events.message_id = k.m
      WHERE events.position <= ${upTo} AND events.type <> 'campaign'`.execute(db);
    collect(rows);
  }
  if (campaigns.length > 0) {
    const { rows } = await sql<EventSqlRow>`
      SELECT ${EVENT_COLUMNS} FROM events
      JOIN json_to_recordset(${JSON.stringify(campaigns)}) AS k(a bigint, c bigint) ON events.api_key_id = k.a AND events.campaign_id = k.c
      WHERE events.position <= ${upTo} AND events.type = 'campaign'`.execute(db);
    collect(rows);
  }
  for (const list of groups.values()) list.sort(byTimeThenId);
  return groups;
}

export function byTimeThenId(a: LogEvent, b: LogEvent): number {
  return a.time - b.time || (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0);
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
