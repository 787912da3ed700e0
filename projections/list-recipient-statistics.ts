import { API_KEY, bigints, col } from './kit/columns.js';
import { DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { stableId } from './kit/ids.js';
import { messageFacts, otherValues } from './kit/message-facts.js';
import { DISTINCT_SQL, disagreeSql, otherValuesSql, stableIdSql, tOf, utf8, zerosSql } from './kit/sql.js';
import type { Group, Output, Projection, Value } from './kit/types.js';

/** A message named a list recipient it does not count under: no counts, `messages` 0, `named` 1. */
const NAMED_ONLY = [...DISTINCT_SUMS.map(() => 0), 0, 1];

/**
 * /listrecipientstatistics: distinct-message counts per (list, recipient) for messages sent to a
 * list. `list_recipient_id` is a stable id derived from the tenant, list and address.
 *
 * `messages` counts the messages counted in a row, `named` those whose events name its list and
 * its address (each by some event: every list × every address a message's events give);
 * `contact_id`, `last_activity_at` and `unsubscribed_at` are the largest / smallest among the
 * latter (`otherValues` in kit/message-facts.ts says why). The API lists the rows with
 * `messages` > 0.
 */
export const listRecipientStatistics: Projection = {
  name: 'list-recipient-statistics',
  version: 4,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'list_recipient_stats',
      keys: [API_KEY, col('list_id', 'bigint'), col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS, 'messages', 'named'),
      maxes: [col('list_recipient_id', 'bigint', true), col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      mins: [col('unsubscribed_at', 'bigint', true)],
      indexes: [['api_key_id', 'list_recipient_id'], ['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.listId === '0' || f.email === '') return;
    const mins = [f.first.unsub?.time ?? null];
    const maxes = (listId: string, email: string): Value[] => [stableId(`list-recipient:${f.apiKeyId}:${listId}:${email}`), f.contactId, f.lastActivity];
    out.add('list_recipient_stats', [f.apiKeyId, f.listId, f.email], [...distinctCounts(f), 1, 1], maxes(f.listId, f.email), mins);
    const otherLists = otherValues(f, 'listId');
    const otherEmails = otherValues(f, 'email');
    if (otherLists.length === 0 && otherEmails.length === 0) return;
    for (const listId of [f.listId, ...otherLists]) {
      for (const email of [f.email, ...otherEmails]) {
        if (listId !== f.listId || email !== f.email) out.add('list_recipient_stats', [f.apiKeyId, listId, email], NAMED_ONLY, maxes(listId, email), mins);
      }
    }
  },
  sql: {
    list_recipient_stats: `
      SELECT api_key_id, list_id, email, ${DISTINCT_SQL}, 1 AS messages, 1 AS named,
        ${stableIdSql(utf8(`'list-recipient:' || api_key_id || ':' || list_id || ':' || email`))} AS list_recipient_id,
        contact_id, last_activity AS last_activity_at, ${tOf('unsub')} AS unsubscribed_at
      FROM facts WHERE list_id <> 0 AND email <> ''
      UNION ALL
      SELECT f.api_key_id, l.list_id, n.email, ${zerosSql([...DISTINCT_SUMS, 'messages'])}, 1 AS named,
        ${stableIdSql(utf8(`'list-recipient:' || f.api_key_id || ':' || l.list_id || ':' || n.email`))} AS list_recipient_id,
        f.contact_id, f.last_activity AS last_activity_at, f.${tOf('unsub')} AS unsubscribed_at
      FROM facts f CROSS JOIN LATERAL ${otherValuesSql('list_id')} l CROSS JOIN LATERAL ${otherValuesSql('email')} n
      WHERE f.list_id <> 0 AND f.email <> '' AND (${disagreeSql('list_id')} OR ${disagreeSql('email')})
        AND (l.list_id <> f.list_id OR n.email <> f.email)`,
  },
};
