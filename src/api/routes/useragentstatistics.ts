import { sql } from 'kysely';
import { z } from 'zod';
import { CAMPAIGN_FILTERS, CAMPAIGN_FILTER_ALIASES, campaignConditions } from '../conventions/campaign-filters.js';
import { wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { oneOf, text } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { conditions, readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { foldedText } from '../conventions/folded-text.js';

/**
 * /useragentstatistics — per platform and mail client (UserAgent, parsed at ingest) over the
 * messages the campaign filter block selects, from `user_agent_stats`
 * (projections/user-agents.ts): Count = open or click events, DistinctCount = messages.
 * - Event: open (the default) or click. The two are never mixed: a message that opened and
 *   clicked with one client cannot be counted once from this read model.
 * - Platform / ExcludePlatform: platform name, without regard to case.
 * - Default order: Count DESC, then Platform, UserAgent. No sort in Mailjet's metadata; Count,
 *   DistinctCount, Platform and UserAgent are offered, both directions.
 */

const query = listSchema({
  ...CAMPAIGN_FILTERS,
  Event: oneOf(['open', 'click']).optional().meta({ description: 'open (default) or click' }),
  ExcludePlatform: text(100).optional().meta({ description: 'Leave out this platform' }),
  Platform: text(100).optional().meta({ description: 'Only this platform (e.g. Windows, iOS, Android, macOS)' }),
});

const record = z.object({
  Count: z.number().int().meta({ description: 'Events (opens or clicks)' }),
  DistinctCount: z.number().int().meta({ description: 'Distinct messages' }),
  Platform: z.string(),
  UserAgent: z.string().meta({ description: 'Mail client or browser' }),
});

interface Row {
  platform: string;
  client: string;
  events: bigint;
  messages: bigint;
}

const SORTABLE = { Count: sql.ref('events'), DistinctCount: sql.ref('messages'), Platform: sql.ref('platform'), UserAgent: sql.ref('client') };

export const useragentstatisticsResource = defineResource({
  name: 'useragentstatistics',
  description: 'Opens or clicks per platform and mail client.',
  query,
  record,
  aliases: CAMPAIGN_FILTER_ALIASES,
  unsupported: { MessageStatus: 'Mailjet takes it on the message-event resources, not here' },
  async list({ db, principal, query: q, page }) {
    const inner = [
      tenant(principal.apiKeyId, sql.ref('t.api_key_id')),
      sql`t.event = ${q.Event ?? 'open'}`,
      ...campaignConditions(principal.apiKeyId, q),
      ...conditions([
        [q.Platform, () => sql`lower(t.platform) = ${foldedText(q.Platform ?? '')}`],
        [q.ExcludePlatform, () => sql`lower(t.platform) <> ${foldedText(q.ExcludePlatform ?? '')}`],
      ]),
    ];
    const from = sql`(SELECT t.api_key_id, t.platform, t.client, sum(t.count)::int8 AS events, sum(t.distinct_count)::int8 AS messages
      FROM user_agent_stats t WHERE ${sql.join(inner, sql` AND `)} GROUP BY t.api_key_id, t.platform, t.client) u`;
    const order = orderBy('useragentstatistics', q.Sort, SORTABLE, [sql`events DESC`, sql`platform`, sql`client`]);
    const { rows, total } = await readList<Row>(db, { from, columns: sql`*`, where: [tenant(principal.apiKeyId)], orderBy: order }, page);
    return {
      rows: rows.map((r) => ({ Count: wireInt(r.events), DistinctCount: wireInt(r.messages), Platform: r.platform, UserAgent: r.client })),
      total,
    };
  },
});
