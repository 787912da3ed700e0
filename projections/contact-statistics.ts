import { maxId } from './kit/ids.js';
import { API_KEY, bigints, col } from './kit/columns.js';
import { countedHere, DISTINCT_SUMS } from './kit/distinct.js';
import { messageFacts, otherValues } from './kit/message-facts.js';
import { DISTINCT_SQL, disagreeSql, distinctWhereSql } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/** A message named a recipient it does not count under: no counts, `messages` 0, `named` 1. */
const NAMED_ONLY = [...DISTINCT_SUMS.map(() => 0), 0, 1];

/**
 * /contactstatistics: distinct-message counts per recipient (keyed by email; ContactID kept).
 *
 * `messages` counts the messages counted in a row, `named` those whose events carry its address.
 * `contact_id` and `last_activity_at` are the largest ContactID and event time among the events
 * that carry the address (for a message whose events agree on it, all of them): a message whose
 * events give several addresses counts under the largest and leaves each of the others what its
 * own events say (`otherValues` in kit/message-facts.ts says why). The API lists the rows with
 * `messages` > 0.
 */
export const contactStatistics: Projection = {
  name: 'contact-statistics',
  version: 5,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'contact_stats',
      keys: [API_KEY, col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS, 'messages', 'named'),
      maxes: [col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      indexes: [['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at'], ['api_key_id', 'lower(email)']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.email === '') return;
    if (otherValues(f, 'email').length === 0) {
      out.add('contact_stats', [f.apiKeyId, f.email], countedHere(f), [f.contactId, f.lastActivity]);
      return;
    }
    const byAddress = new Map<string, { contactId: string; last: number }>();
    for (const e of f.events) {
      if (e.email === '') continue;
      const a = byAddress.get(e.email);
      if (a === undefined) byAddress.set(e.email, { contactId: e.contactId, last: e.time });
      else {
        a.contactId = maxId(a.contactId, e.contactId);
        if (e.time > a.last) a.last = e.time;
      }
    }
    for (const [email, a] of byAddress) {
      out.add('contact_stats', [f.apiKeyId, email], email === f.email ? countedHere(f) : NAMED_ONLY, [a.contactId, a.last]);
    }
  },
  sql: {
    // Messages whose events agree on the address from their facts; the others address by address.
    contact_stats: `
      SELECT api_key_id, email, ${DISTINCT_SQL}, 1 AS messages, 1 AS named, contact_id, last_activity AS last_activity_at
      FROM facts f WHERE email <> '' AND NOT ${disagreeSql('email')}
      UNION ALL
      SELECT f.api_key_id, a.email, ${distinctWhereSql('a.email = f.email')}, (a.email = f.email)::int AS messages, 1 AS named,
        a.contact_id, a.last_activity AS last_activity_at
      FROM facts f CROSS JOIN LATERAL (
        SELECT e.email, max(e.contact_id) AS contact_id, max(e.event_time) AS last_activity FROM log e
        WHERE e.api_key_id = f.api_key_id AND e.message_id = f.message_id AND e.type <> 'campaign' AND e.email <> '' GROUP BY e.email
      ) a
      WHERE f.email <> '' AND ${disagreeSql('email')}`,
  },
};
