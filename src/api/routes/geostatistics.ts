import { type Kysely, sql } from 'kysely';
import { z } from 'zod';
import type { Database } from '../../db/schema.js';
import { apiErrors } from '../../http/errors.js';
import { CAMPAIGN_FILTERS, CAMPAIGN_FILTER_ALIASES, MESSAGE_STATUS, campaignConditions } from '../conventions/campaign-filters.js';
import { wireInt } from '../conventions/json.js';
import { type Page, itemFilters, listSchema } from '../conventions/paging.js';
import { parseQuery } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { readList, tenant } from '../list-query.js';
import { type ListResult, defineResource } from '../resource.js';

/**
 * /geostatistics — opens and clicks per country (the `geo` of the open / click events) over the
 * messages the campaign filter block selects, from `geo_stats` (projections/geo.ts).
 * - OpenedCount / ClickedCount count distinct messages, like every unqualified OpenedCount /
 *   ClickedCount (projections/README.md, the numbers): a message opened from two countries
 *   counts in both.
 * - MessageStatus is refused (400): `geo_stats` keeps no per-message rows to test a status on.
 * - Item form /{Country} (two-letter code, any case), with the same filters as the list.
 * - Default order: Country. No sort in Mailjet's metadata; Country, OpenedCount and
 *   ClickedCount are offered, both directions.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  MessageStatus: MESSAGE_STATUS.MessageStatus.meta({ description: 'Not available here (400): the geo read model keeps no per-message data' }),
});
const ITEM_QUERY = itemFilters(query);
type Query = z.output<typeof ITEM_QUERY> & { Sort?: string | undefined };

const record = z.object({
  ClickedCount: z.number().int().meta({ description: 'Messages clicked from this country' }),
  Country: z.string().meta({ description: 'Two-letter country code' }),
  OpenedCount: z.number().int().meta({ description: 'Messages opened from this country' }),
});

interface Row {
  country: string;
  opened: bigint;
  clicked: bigint;
}

const SORTABLE = { Country: sql.ref('country'), OpenedCount: sql.ref('opened'), ClickedCount: sql.ref('clicked') };

async function read(db: Kysely<Database>, apiKeyId: string, q: Query, page: Page, country?: string): Promise<ListResult> {
  if (q.MessageStatus !== undefined) throw apiErrors.badRequest('Invalid parameter MessageStatus: not available on geostatistics (no per-message geo data)');
  const inner = [tenant(apiKeyId, sql.ref('t.api_key_id')), ...campaignConditions(apiKeyId, q)];
  if (country !== undefined) inner.push(country.includes('\u0000') ? sql`FALSE` : sql`t.country = ${country.toUpperCase()}`);
  const from = sql`(SELECT t.api_key_id, t.country, sum(t.opened_messages)::int8 AS opened, sum(t.clicked_messages)::int8 AS clicked
    FROM geo_stats t WHERE ${sql.join(inner, sql` AND `)} GROUP BY t.api_key_id, t.country) g`;
  const { rows, total } = await readList<Row>(db, { from, columns: sql`*`, where: [tenant(apiKeyId)], orderBy: orderBy('geostatistics', q.Sort, SORTABLE, [sql`country`]) }, page);
  return { rows: rows.map((r) => ({ ClickedCount: wireInt(r.clicked), Country: r.country, OpenedCount: wireInt(r.opened) })), total };
}

export const geostatisticsResource = defineResource({
  name: 'geostatistics',
  description: 'Opened and clicked messages per country.',
  query,
  record,
  aliases: CAMPAIGN_FILTER_ALIASES,
  list: ({ db, principal, query: q, page }) => read(db, principal.apiKeyId, q, page),
  items: [
    {
      path: ':country',
      description: 'One country, with the same filters as the list.',
      query: ITEM_QUERY,
      find: async ({ db, principal, rawQuery }, params) =>
        (await read(db, principal.apiKeyId, parseQuery(ITEM_QUERY, rawQuery, CAMPAIGN_FILTER_ALIASES), { limit: 1000, offset: 0, countOnly: false }, params['country'] ?? '')).rows,
    },
  ],
});
