import { API_KEY, col, DIM_COLUMNS, DIM_INDEXES } from './kit/columns.js';
import { campaignDims, messageFacts, PIPELINE_RANK } from './kit/message-facts.js';
import { dimsSql, nOf, tOf } from './kit/sql.js';
import type { Group, LogEvent, Output, Projection } from './kit/types.js';

/** Status strings that are not the event type's own name (a bounce's depends on the event). */
const STATUS_OF_TYPE: Partial<Record<LogEvent['type'], string>> = { open: 'opened', click: 'clicked' };

/** The status of a message whose latest event has `rank` (`latest % 16` of the facts), in SQL; `failure` is its last bounce or block. */
function statusSql(rank: string, failure: string): string {
  const byRank = new Map<number, string>();
  for (const [type, r] of Object.entries(PIPELINE_RANK) as [LogEvent['type'], number][]) {
    if (type === 'campaign') continue;
    byRank.set(r, type === 'bounce' || type === 'blocked'
      ? `CASE WHEN ${failure}.type = 'blocked' THEN 'blocked' WHEN ${failure}.hard_bounce THEN 'hardbounced' ELSE 'softbounced' END`
      : `'${STATUS_OF_TYPE[type] ?? type}'`);
  }
  return `CASE ${rank} ${[...byRank].map(([r, status]) => `WHEN ${r} THEN ${status}`).join(' ')} ELSE 'unknown' END`;
}

/**
 * /message and /message/{MessageID}: one row per message with its current status. The
 * status is that of its latest event (by time; at equal times the later pipeline stage wins).
 * A message's timeline (/messagehistory) is read straight from the log, which is indexed by
 * (tenant, message).
 *
 * Nearly every event of a message rewrites its row (status, last activity, counts), so the
 * columns an event changes are kept out of the indexes and pages keep a fifth free: the update
 * stays on the row's page and touches none of its ten indexes (a HOT update; migration 0005).
 * A MessageStatus filter therefore has no index: counting its matches reads every message of the tenant.
 */
export const messages: Projection = {
  name: 'messages',
  version: 5,
  groups: ['message'],
  tables: [
    {
      kind: 'rows',
      name: 'messages',
      keys: [API_KEY, col('message_id', 'numeric')],
      columns: [
        col('contact_id', 'bigint'),
        ...DIM_COLUMNS,
        col('email', 'text'),
        col('recipient_domain', 'text'),
        col('esp', 'text'),
        col('message_time', 'bigint', true),
        col('status', 'text'),
        col('state_id', 'integer', true),
        col('is_state_permanent', 'boolean'),
        col('first_open_at', 'bigint', true),
        col('first_click_at', 'bigint', true),
        col('last_activity_at', 'bigint'),
        col('attempt_count', 'integer'),
        col('event_count', 'integer'),
      ],
      indexes: [['api_key_id', 'message_time'], ['api_key_id', 'campaign_id', 'message_time'], ['api_key_id', 'lower(email)'], ...DIM_INDEXES],
      fillfactor: 80,
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    let latest: LogEvent | null = null;
    let failure: LogEvent | null = null;
    for (const e of f.events) {
      if (latest === null || e.time > latest.time || (e.time === latest.time && PIPELINE_RANK[e.type] >= PIPELINE_RANK[latest.type])) latest = e;
      if (e.type === 'bounce' || e.type === 'blocked') failure = e;
    }
    const attempts = f.count.sent + f.count.deferred + f.count.bounced;
    out.row(
      'messages',
      [f.apiKeyId, f.messageId],
      [
        f.contactId,
        ...campaignDims(f),
        f.email,
        f.recipientDomain,
        f.esp,
        f.messageTime,
        latest === null ? 'unknown' : statusOf(latest),
        failure?.stateId ?? null,
        failure !== null && (failure.type === 'blocked' || failure.hardBounce),
        f.first.opened?.time ?? null,
        f.first.clicked?.time ?? null,
        f.lastActivity,
        attempts,
        f.events.length,
      ],
    );
  },
  sql: {
    // `latest % 16` is the rank of the latest event. Bounces and blocks share a rank: at the
    // latest time the one with the largest EventID wins, which is the message's last failure.
    messages: `
      SELECT f.api_key_id, f.message_id, f.contact_id, ${dimsSql('f')}, f.email, f.recipient_domain, f.esp, f.message_time,
        ${statusSql('f.latest % 16', 'x')} AS status,
        x.state_id, coalesce(x.type = 'blocked' OR x.hard_bounce, false) AS is_state_permanent,
        f.${tOf('opened')} AS first_open_at, f.${tOf('clicked')} AS first_click_at, f.last_activity AS last_activity_at,
        f.${nOf('sent')} + f.${nOf('deferred')} + f.${nOf('bounced')} AS attempt_count, f.events AS event_count
      FROM facts f LEFT JOIN (
        SELECT DISTINCT ON (api_key_id, message_id) api_key_id, message_id, type, hard_bounce, state_id
        FROM engagement WHERE type IN ('bounce', 'blocked') ORDER BY api_key_id, message_id, event_time DESC, event_id COLLATE "C" DESC
      ) x USING (api_key_id, message_id)`,
  },
};

/** Mailjet's message Status strings. */
function statusOf(e: LogEvent): string {
  if (e.type === 'bounce') return e.hardBounce ? 'hardbounced' : 'softbounced';
  return STATUS_OF_TYPE[e.type] ?? e.type;
}
