import { API_KEY, bigints, col } from './kit/columns.js';
import { DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { messageFacts } from './kit/message-facts.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /contactstatistics: distinct-message counts per recipient (keyed by email; ContactID kept).
 * Each event of a recipient's messages rewrites the row, so `last_activity_at` is not indexed
 * and pages keep a fifth free (HOT updates, as in `messages.ts`): a LastActivityAt sort or
 * filter reads the tenant's rows.
 */
export const contactStatistics: Projection = {
  name: 'contact-statistics',
  version: 1,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'contact_stats',
      keys: [API_KEY, col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS),
      maxes: [col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      indexes: [['api_key_id', 'contact_id']],
      fillfactor: 80,
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.email === '') return;
    out.add('contact_stats', [f.apiKeyId, f.email], distinctCounts(f), [f.contactId, f.lastActivity]);
  },
};
