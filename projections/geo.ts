import { API_KEY, bigints, col, DIM_COLUMNS, DIM_FILTER_INDEXES } from './kit/columns.js';
import { campaignDims, messageFacts } from './kit/message-facts.js';
import { dimsSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/** /geostatistics: opens and clicks per country (the `geo` of each event), as events and as messages. */
export const geo: Projection = {
  name: 'geo',
  version: 3,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'geo_stats',
      keys: [API_KEY, ...DIM_COLUMNS, col('country', 'text')],
      sums: bigints('opened_events', 'clicked_events', 'opened_messages', 'clicked_messages'),
      indexes: [['api_key_id', 'campaign_id'], ['api_key_id', 'country'], ...DIM_FILTER_INDEXES],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const perCountry = new Map<string, [number, number]>();
    for (const e of f.events) {
      if ((e.type !== 'open' && e.type !== 'click') || e.geo === '') continue;
      let v = perCountry.get(e.geo);
      if (v === undefined) perCountry.set(e.geo, (v = [0, 0]));
      v[e.type === 'open' ? 0 : 1] += 1;
    }
    const dims = campaignDims(f);
    for (const [country, [opens, clicks]] of perCountry) {
      out.add('geo_stats', [f.apiKeyId, ...dims, country], [opens, clicks, opens > 0 ? 1 : 0, clicks > 0 ? 1 : 0]);
    }
  },
  sql: {
    geo_stats: `
      SELECT api_key_id, ${dimsSql('e')}, geo AS country, count(*) FILTER (WHERE type = 'open') AS opened_events,
        count(*) FILTER (WHERE type = 'click') AS clicked_events, bool_or(type = 'open')::int AS opened_messages, bool_or(type = 'click')::int AS clicked_messages
      FROM engagement e WHERE type IN ('open', 'click') AND geo <> '' GROUP BY api_key_id, message_id, ${dimsSql('e')}, geo`,
  },
};
