import { API_KEY, bigints, col } from './kit/columns.js';
import { isProcessed, messageFacts, otherValues } from './kit/message-facts.js';
import { disagreeSql, hasSql, otherValuesSql, PROCESSED_SQL, zerosSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

const FIELDS = ['Title', 'Subject', 'IDType', 'Status', 'SendTimeStart', 'Starred', 'EditMode', 'EditType'] as const;

/** The distinct-message counts of a campaign, in `campaign_stats`' column order. */
const COUNTS = ['processed', 'delivered', 'opened', 'clicked', 'bounced', 'blocked', 'spam', 'unsub'] as const;

/** A message named a campaign it does not count in: no counts, `messages` 0, `named` 1. */
const NAMED_ONLY = [...COUNTS.map(() => 0), 0, 1];

/**
 * /campaignoverview: distinct-message counts per campaign, and the campaign's metadata from its
 * `campaign` events. Each metadata field comes from the latest event (by time, then EventID)
 * that carries it, so a later event updates only the fields it sends.
 *
 * `messages` counts the messages counted in a row, `named` those whose events name its campaign,
 * and `first_message_time` is the earliest message time among the latter (`otherValues` in
 * kit/message-facts.ts says why); the API lists the rows with `messages` > 0.
 */
export const campaignOverview: Projection = {
  name: 'campaign-overview',
  version: 4,
  groups: ['message', 'campaign'],
  tables: [
    {
      kind: 'counters',
      name: 'campaign_stats',
      keys: [API_KEY, col('campaign_id', 'bigint')],
      sums: bigints(...COUNTS, 'messages', 'named'),
      mins: [col('first_message_time', 'bigint', true)],
    },
    {
      kind: 'rows',
      name: 'campaigns',
      keys: [API_KEY, col('campaign_id', 'bigint')],
      columns: [
        col('title', 'text', true),
        col('subject', 'text', true),
        col('id_type', 'text', true),
        col('status', 'integer', true),
        col('send_time_start', 'bigint', true),
        col('starred', 'boolean', true),
        col('edit_mode', 'text', true),
        col('edit_type', 'text', true),
        col('updated_at', 'bigint'),
      ],
    },
  ],
  project(group: Group, out: Output): void {
    if (group.kind === 'campaign') {
      projectMetadata(group, out);
      return;
    }
    const f = messageFacts(group);
    if (f.campaignId === '0') return;
    const c = f.count;
    out.add(
      'campaign_stats',
      [f.apiKeyId, f.campaignId],
      [isProcessed(f) ? 1 : 0, c.sent > 0 ? 1 : 0, c.opened > 0 ? 1 : 0, c.clicked > 0 ? 1 : 0, c.bounced > 0 ? 1 : 0, c.blocked > 0 ? 1 : 0, c.spam > 0 ? 1 : 0, c.unsub > 0 ? 1 : 0, 1, 1],
      undefined,
      [f.messageTime],
    );
    for (const other of otherValues(f, 'campaignId')) out.add('campaign_stats', [f.apiKeyId, other], NAMED_ONLY, undefined, [f.messageTime]);
  },
  sql: {
    campaign_stats: `
      SELECT api_key_id, campaign_id, ${PROCESSED_SQL} AS processed, ${hasSql('sent')} AS delivered, ${hasSql('opened')} AS opened,
        ${hasSql('clicked')} AS clicked, ${hasSql('bounced')} AS bounced, ${hasSql('blocked')} AS blocked, ${hasSql('spam')} AS spam,
        ${hasSql('unsub')} AS unsub, 1 AS messages, 1 AS named, message_time AS first_message_time
      FROM facts WHERE campaign_id <> 0
      UNION ALL
      SELECT f.api_key_id, n.campaign_id, ${zerosSql([...COUNTS, 'messages'])}, 1 AS named, f.message_time AS first_message_time
      FROM facts f CROSS JOIN LATERAL ${otherValuesSql('campaign_id')} n
      WHERE ${disagreeSql('campaign_id')} AND n.campaign_id <> f.campaign_id`,
    // Per field, the value of the latest event (by time, then EventID) whose payload has it.
    campaigns: `
      SELECT api_key_id, campaign_id,
        ${jsonText('Title')} AS title, ${jsonText('Subject')} AS subject, ${jsonText('IDType')} AS id_type,
        ${jsonNumber('Status', 'integer')} AS status, ${jsonNumber('SendTimeStart', 'bigint')} AS send_time_start,
        CASE WHEN jsonb_typeof(${latest('Starred')}) = 'boolean' THEN ${latest('Starred')}::boolean END AS starred,
        ${jsonText('EditMode')} AS edit_mode, ${jsonText('EditType')} AS edit_type, updated_at
      FROM (
        SELECT api_key_id, campaign_id, max(event_time) AS updated_at,
          ${FIELDS.map((f) => `(array_agg(payload -> '${f}' ORDER BY event_time DESC, event_id COLLATE "C" DESC) FILTER (WHERE payload ? '${f}'))[1] AS ${latest(f)}`).join(', ')}
        FROM log WHERE type = 'campaign' GROUP BY api_key_id, campaign_id
      ) latest`,
  },
};

/** The column of the SQL below holding a field's latest value (JSON). */
function latest(field: string): string {
  return `latest_${field.toLowerCase()}`;
}

/** `text` below in SQL. */
function jsonText(field: string): string {
  return `CASE WHEN jsonb_typeof(${latest(field)}) = 'string' THEN ${latest(field)} #>> '{}' END`;
}

/** `num` below in SQL: a JSON number, or a string of digits, as the column's type; else null. */
function jsonNumber(field: string, type: 'integer' | 'bigint'): string {
  const v = latest(field);
  return `CASE WHEN jsonb_typeof(${v}) = 'number' OR (jsonb_typeof(${v}) = 'string' AND (${v} #>> '{}') ~ '^-?[0-9]+$') THEN (${v} #>> '{}')::numeric::${type} END`;
}

function projectMetadata(group: Group, out: Output): void {
  const latest: Record<string, unknown> = {};
  let updatedAt = 0;
  for (const e of group.events) {
    const payload = e.campaignPayload ?? {};
    for (const field of FIELDS) if (payload[field] !== undefined) latest[field] = payload[field];
    updatedAt = Math.max(updatedAt, e.time);
  }
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  const num = (v: unknown) => (typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : null);
  out.row(
    'campaigns',
    [group.apiKeyId, group.id],
    [
      text(latest.Title),
      text(latest.Subject),
      text(latest.IDType),
      num(latest.Status),
      num(latest.SendTimeStart),
      typeof latest.Starred === 'boolean' ? latest.Starred : null,
      text(latest.EditMode),
      text(latest.EditType),
      updatedAt,
    ],
  );
}
