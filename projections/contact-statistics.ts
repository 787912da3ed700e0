import { API_KEY, bigints, col } from './kit/columns.js';
import { DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { messageFacts } from './kit/message-facts.js';
import { DISTINCT_SQL } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/** /contactstatistics: distinct-message counts per recipient (keyed by email; ContactID kept). */
export const contactStatistics: Projection = {
  name: 'contact-statistics',
  version: 3,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'contact_stats',
      keys: [API_KEY, col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS),
      maxes: [col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      indexes: [['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.email === '') return;
    out.add('contact_stats', [f.apiKeyId, f.email], distinctCounts(f), [f.contactId, f.lastActivity]);
  },
  sql: {
    contact_stats: `SELECT api_key_id, email, ${DISTINCT_SQL}, contact_id, last_activity AS last_activity_at FROM facts WHERE email <> ''`,
  },
};
