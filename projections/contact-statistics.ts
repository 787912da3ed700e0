import { API_KEY, bigints, col } from './kit/columns.js';
import { DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { messageFacts, otherValues } from './kit/message-facts.js';
import { DISTINCT_SQL, disagreeSql, otherValuesSql, zerosSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/** A message named a recipient it does not count under: no counts, `messages` 0, `named` 1. */
const NAMED_ONLY = [...DISTINCT_SUMS.map(() => 0), 0, 1];

/**
 * /contactstatistics: distinct-message counts per recipient (keyed by email; ContactID kept).
 *
 * `messages` counts the messages counted in a row, `named` those whose events name its address;
 * `contact_id` and `last_activity_at` are the largest among the latter (`otherValues` in
 * kit/message-facts.ts says why). The API lists the rows with `messages` > 0.
 */
export const contactStatistics: Projection = {
  name: 'contact-statistics',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'contact_stats',
      keys: [API_KEY, col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS, 'messages', 'named'),
      maxes: [col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      indexes: [['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.email === '') return;
    const maxes = [f.contactId, f.lastActivity];
    out.add('contact_stats', [f.apiKeyId, f.email], [...distinctCounts(f), 1, 1], maxes);
    for (const other of otherValues(f, 'email')) out.add('contact_stats', [f.apiKeyId, other], NAMED_ONLY, maxes);
  },
  sql: {
    contact_stats: `
      SELECT api_key_id, email, ${DISTINCT_SQL}, 1 AS messages, 1 AS named, contact_id, last_activity AS last_activity_at
      FROM facts WHERE email <> ''
      UNION ALL
      SELECT f.api_key_id, n.email, ${zerosSql([...DISTINCT_SUMS, 'messages'])}, 1 AS named, f.contact_id, f.last_activity AS last_activity_at
      FROM facts f CROSS JOIN LATERAL ${otherValuesSql('email')} n
      WHERE ${disagreeSql('email')} AND n.email <> f.email`,
  },
};
