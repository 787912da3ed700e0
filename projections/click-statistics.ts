import { API_KEY, col, DIM_COLUMNS, DIM_INDEXES } from './kit/columns.js';
import { stableId } from './kit/ids.js';
import { campaignDims, delayOf, messageFacts } from './kit/message-facts.js';
import { dimsSql, userAgentIdSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /clickstatistics: one row per click event. `id` is the click's log position; the delay is
 * from the message time (null until the message has a delivery event).
 */
export const clickStatistics: Projection = {
  name: 'click-statistics',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'rows',
      name: 'click_stats',
      keys: [API_KEY, col('id', 'bigint')],
      columns: [
        col('message_id', 'numeric'),
        col('contact_id', 'bigint'),
        ...DIM_COLUMNS,
        col('clicked_at', 'bigint'),
        col('clicked_delay', 'bigint', true),
        col('url', 'text'),
        col('user_agent_id', 'bigint'),
        col('ua_platform', 'text'),
        col('ua_client', 'text'),
      ],
      indexes: [['api_key_id', 'clicked_at'], ['api_key_id', 'campaign_id', 'clicked_at'], ['api_key_id', 'message_id'], ...DIM_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const dims = campaignDims(f);
    for (const e of f.events) {
      if (e.type !== 'click') continue;
      out.row(
        'click_stats',
        [f.apiKeyId, String(e.position)],
        [f.messageId, f.contactId, ...dims, e.time, delayOf(f, e), e.url, userAgentId(e.uaPlatform, e.uaClient), e.uaPlatform, e.uaClient],
      );
    }
  },
  sql: {
    click_stats: `
      SELECT api_key_id, position AS id, message_id, contact_id, ${dimsSql('e')}, event_time AS clicked_at, event_time - message_time AS clicked_delay,
        url, ${userAgentIdSql('ua_platform', 'ua_client')} AS user_agent_id, ua_platform, ua_client
      FROM engagement e WHERE type = 'click'`,
  },
};

/** A stable id per parsed user agent (platform + client). */
export function userAgentId(platform: string, client: string): string {
  return stableId(`ua:${platform}\u0000${client}`);
}
