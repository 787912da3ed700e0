import { API_KEY, bigints, col, DIM_COLUMNS, DIM_FILTER_INDEXES } from './kit/columns.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import { dimsSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /useragentstatistics: per platform and client (parsed at ingest) and event (open / click):
 * `count` events and `distinct_count` messages.
 */
export const userAgents: Projection = {
  name: 'user-agents',
  version: 3,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'user_agent_stats',
      keys: [API_KEY, ...DIM_COLUMNS, col('event', 'text'), col('platform', 'text'), col('client', 'text')],
      sums: bigints('count', 'distinct_count'),
      indexes: [['api_key_id', 'campaign_id', 'event'], ['api_key_id', 'lower(platform)'], ...DIM_FILTER_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const counts = new Map<string, [string, string, string, number]>();
    for (const e of f.events) {
      if (e.type !== 'open' && e.type !== 'click') continue;
      const key = `${e.type}\u0000${e.uaPlatform}\u0000${e.uaClient}`;
      const seen = counts.get(key);
      if (seen === undefined) counts.set(key, [e.type, e.uaPlatform, e.uaClient, 1]);
      else seen[3] += 1;
    }
    const dims = campaignDims(f);
    for (const [event, platform, client, n] of counts.values()) {
      out.add('user_agent_stats', [f.apiKeyId, ...dims, event, platform, client], [n, 1]);
    }
  },
  sql: {
    user_agent_stats: `
      SELECT api_key_id, ${dimsSql('e')}, type AS event, ua_platform AS platform, ua_client AS client, count(*) AS count, 1 AS distinct_count
      FROM engagement e WHERE type IN ('open', 'click') GROUP BY api_key_id, message_id, ${dimsSql('e')}, type, ua_platform, ua_client`,
  },
};
