import { API_KEY, col, DIM_COLUMNS, DIM_INDEXES } from './kit/columns.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import { dimsSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /bouncestatistics: one row per bounce event (`id` = its log position; the API's ID is the
 * message id). StateID was derived from the error text at ingest.
 */
export const bounceStatistics: Projection = {
  name: 'bounce-statistics',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'rows',
      name: 'bounce_stats',
      keys: [API_KEY, col('id', 'bigint')],
      columns: [
        col('message_id', 'numeric'),
        col('contact_id', 'bigint'),
        ...DIM_COLUMNS,
        col('bounced_at', 'bigint'),
        col('is_blocked', 'boolean'),
        col('is_state_permanent', 'boolean'),
        col('state_id', 'integer', true),
        col('error_related_to', 'text'),
        col('error', 'text'),
      ],
      indexes: [['api_key_id', 'bounced_at'], ['api_key_id', 'campaign_id', 'bounced_at'], ['api_key_id', 'message_id'], ...DIM_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const dims = campaignDims(f);
    for (const e of f.events) {
      if (e.type !== 'bounce') continue;
      out.row(
        'bounce_stats',
        [f.apiKeyId, String(e.position)],
        [f.messageId, f.contactId, ...dims, e.time, e.blocked, e.hardBounce, e.stateId, e.errorRelatedTo, e.error],
      );
    }
  },
  sql: {
    bounce_stats: `
      SELECT api_key_id, position AS id, message_id, contact_id, ${dimsSql('e')}, event_time AS bounced_at, blocked AS is_blocked,
        hard_bounce AS is_state_permanent, state_id, error_related_to, error
      FROM engagement e WHERE type = 'bounce'`,
  },
};
