import { userAgentId } from './click-statistics.js';
import { API_KEY, col, DIM_COLUMNS, DIM_INDEXES } from './kit/columns.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import { dimsSql, tOf, userAgentIdSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /openinformation: one row per opened message, from its first open (smallest time, ties by
 * EventID). `arrived_at` is the message's first `sent` (its message time when it has none).
 */
export const openInformation: Projection = {
  name: 'open-information',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'rows',
      name: 'open_info',
      keys: [API_KEY, col('message_id', 'numeric')],
      columns: [
        col('id', 'bigint'),
        col('contact_id', 'bigint'),
        ...DIM_COLUMNS,
        col('opened_at', 'bigint'),
        col('arrived_at', 'bigint', true),
        col('user_agent_id', 'bigint'),
        col('user_agent_full', 'text'),
        col('ua_platform', 'text'),
        col('ua_client', 'text'),
      ],
      indexes: [['api_key_id', 'opened_at'], ['api_key_id', 'campaign_id', 'opened_at'], ...DIM_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const open = f.first.opened;
    if (open === null) return;
    out.row(
      'open_info',
      [f.apiKeyId, f.messageId],
      [
        String(open.position),
        f.contactId,
        ...campaignDims(f),
        open.time,
        f.first.sent?.time ?? f.messageTime,
        userAgentId(open.uaPlatform, open.uaClient),
        open.agent,
        open.uaPlatform,
        open.uaClient,
      ],
    );
  },
  sql: {
    // The first open of each message: smallest time, then EventID.
    open_info: `
      SELECT DISTINCT ON (api_key_id, message_id) api_key_id, message_id, position AS id, contact_id, ${dimsSql('e')}, event_time AS opened_at,
        coalesce(${tOf('sent')}, message_time) AS arrived_at, ${userAgentIdSql('ua_platform', 'ua_client')} AS user_agent_id,
        agent AS user_agent_full, ua_platform, ua_client
      FROM engagement e WHERE type = 'open' ORDER BY api_key_id, message_id, event_time, event_id COLLATE "C"`,
  },
};
