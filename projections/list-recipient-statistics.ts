import { API_KEY, bigints, col } from './kit/columns.js';
import { DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { stableId } from './kit/ids.js';
import { messageFacts } from './kit/message-facts.js';
import { DISTINCT_SQL, stableIdSql, tOf, utf8 } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/**
 * /listrecipientstatistics: distinct-message counts per (list, recipient) for messages sent to a
 * list. `list_recipient_id` is a stable id derived from the tenant, list and address.
 */
export const listRecipientStatistics: Projection = {
  name: 'list-recipient-statistics',
  version: 3,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'list_recipient_stats',
      keys: [API_KEY, col('list_id', 'bigint'), col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS),
      maxes: [col('list_recipient_id', 'bigint', true), col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      mins: [col('unsubscribed_at', 'bigint', true)],
      indexes: [['api_key_id', 'list_recipient_id'], ['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.listId === '0' || f.email === '') return;
    out.add(
      'list_recipient_stats',
      [f.apiKeyId, f.listId, f.email],
      distinctCounts(f),
      [stableId(`list-recipient:${f.apiKeyId}:${f.listId}:${f.email}`), f.contactId, f.lastActivity],
      [f.first.unsub?.time ?? null],
    );
  },
  sql: {
    list_recipient_stats: `
      SELECT api_key_id, list_id, email, ${DISTINCT_SQL},
        ${stableIdSql(utf8(`'list-recipient:' || api_key_id || ':' || list_id || ':' || email`))} AS list_recipient_id,
        contact_id, last_activity AS last_activity_at, ${tOf('unsub')} AS unsubscribed_at
      FROM facts WHERE list_id <> 0 AND email <> ''`,
  },
};
