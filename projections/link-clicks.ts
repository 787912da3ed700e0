import { API_KEY, bigints, col, DIM_COLUMNS } from './kit/columns.js';
import { stableId } from './kit/ids.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /toplinkclicked and /statistics/link-click: per URL (normalized at ingest) and message
 * dimensions, the messages that clicked it and the click events. `link_id` is stable per URL.
 */
export const linkClicks: Projection = {
  name: 'link-clicks',
  version: 1,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'link_clicks',
      keys: [API_KEY, ...DIM_COLUMNS, col('url', 'text')],
      sums: bigints('clicked_messages', 'clicked_events'),
      maxes: [col('link_id', 'bigint', true)],
      mins: [col('first_clicked_at', 'bigint', true)],
      indexes: [['api_key_id', 'campaign_id', 'url'], ['api_key_id', 'url']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const perUrl = new Map<string, { events: number; first: number }>();
    for (const e of f.events) {
      if (e.type !== 'click' || e.url === '') continue;
      const seen = perUrl.get(e.url);
      if (seen === undefined) perUrl.set(e.url, { events: 1, first: e.time });
      else seen.events += 1;
    }
    const dims = campaignDims(f);
    for (const [url, { events, first }] of perUrl) {
      out.add('link_clicks', [f.apiKeyId, ...dims, url], [1, events], [stableId(`url:${url}`)], [first]);
    }
  },
};
