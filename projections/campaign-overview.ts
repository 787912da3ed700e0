import { API_KEY, bigints, col } from './kit/columns.js';
import { isProcessed, messageFacts } from './kit/message-facts.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /campaignoverview: distinct-message counts per campaign, and the campaign's metadata from its
 * `campaign` events. Each metadata field comes from the latest event (by time, then EventID)
 * that carries it, so a later event updates only the fields it sends.
 */
export const campaignOverview: Projection = {
  name: 'campaign-overview',
  version: 1,
  groups: ['message', 'campaign'],
  tables: [
    {
      kind: 'counters',
      name: 'campaign_stats',
      keys: [API_KEY, col('campaign_id', 'bigint')],
      sums: bigints('processed', 'delivered', 'opened', 'clicked', 'bounced', 'blocked', 'spam', 'unsub'),
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
      [isProcessed(f) ? 1 : 0, c.sent > 0 ? 1 : 0, c.opened > 0 ? 1 : 0, c.clicked > 0 ? 1 : 0, c.bounced > 0 ? 1 : 0, c.blocked > 0 ? 1 : 0, c.spam > 0 ? 1 : 0, c.unsub > 0 ? 1 : 0],
      undefined,
      [f.messageTime],
    );
  },
};

const FIELDS = ['Title', 'Subject', 'IDType', 'Status', 'SendTimeStart', 'Starred', 'EditMode', 'EditType'] as const;

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
