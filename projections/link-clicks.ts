import { API_KEY, bigints, col, DIM_COLUMNS, DIM_FILTER_INDEXES } from './kit/columns.js';
import { stableId } from './kit/ids.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import { dimsSql, stableIdSql, utf8 } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /toplinkclicked and /statistics/link-click: per URL (normalized at ingest) and message
 * dimensions, the messages that clicked it and the click events. `link_id` is stable per URL.
 */
export const linkClicks: Projection = {
  name: 'link-clicks',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'link_clicks',
      keys: [API_KEY, ...DIM_COLUMNS, col('url', 'text')],
      sums: bigints('clicked_messages', 'clicked_events'),
      maxes: [col('link_id', 'bigint', true)],
      indexes: [['api_key_id', 'campaign_id', 'url'], ['api_key_id', 'url'], ['api_key_id', 'link_id'], ...DIM_FILTER_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const perUrl = new Map<string, number>();
    for (const e of f.events) {
      if (e.type !== 'click' || e.url === '') continue;
      perUrl.set(e.url, (perUrl.get(e.url) ?? 0) + 1);
    }
    const dims = campaignDims(f);
    // No one-way (min/max) column that could depend on a message's old dimensions: a message
    // whose events omit some dimension moves between rows when a later event carries it.
    for (const [url, events] of perUrl) {
      out.add('link_clicks', [f.apiKeyId, ...dims, url], [1, events], [stableId(`url:${url}`)]);
    }
  },
  sql: {
    link_clicks: `
      SELECT api_key_id, ${dimsSql('e')}, url, 1 AS clicked_messages, count(*) AS clicked_events, ${stableIdSql(utf8(`'url:' || url`))} AS link_id
      FROM engagement e WHERE type = 'click' AND url <> '' GROUP BY api_key_id, message_id, ${dimsSql('e')}, url`,
  },
};
