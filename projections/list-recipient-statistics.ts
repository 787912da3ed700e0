import { API_KEY, bigints, col } from './kit/columns.js';
import { countedHere, DISTINCT_SUMS, distinctCounts } from './kit/distinct.js';
import { maxId, stableId } from './kit/ids.js';
import { messageFacts, otherValues } from './kit/message-facts.js';
import { DISTINCT_SQL, disagreeSql, distinctWhereSql, stableIdSql, tOf, utf8 } from './kit/sql.js';
import type { Group, Output, Projection } from './kit/types.js';

/** A message named a list recipient it does not count under: no counts, `messages` 0, `named` 1. */
const NAMED_ONLY = [...DISTINCT_SUMS.map(() => 0), 0, 1];

/** What the events of a message that carry one list (or none) and one address say. */
interface Part {
  contactId: string;
  last: number;
  unsub: number | null;
}

/** A message whose events give more than one list or address. */
const DISAGREE = `${disagreeSql('list_id')} OR ${disagreeSql('email')}`;

/** The pair a message counts under. */
const HERE = 'p.list_id = f.list_id AND p.email = f.email';

/** What the events of the message in `facts` row `f` that match `where` say, grouped by `by`. */
function partsSql(where: string, by: string): string {
  return `SELECT ${by}, max(e.contact_id) AS contact_id, max(e.event_time) AS last_activity, min(e.event_time) FILTER (WHERE e.type = 'unsub') AS unsub
    FROM log e WHERE e.api_key_id = f.api_key_id AND e.message_id = f.message_id AND e.type <> 'campaign' AND e.email <> '' AND ${where} GROUP BY ${by}`;
}

/**
 * /listrecipientstatistics: distinct-message counts per (list, recipient) for messages sent to a
 * list. `list_recipient_id` is a stable id derived from the tenant, list and address.
 *
 * `messages` counts the messages counted in a row, `named` those with an event that carries its
 * list and its address. `contact_id`, `last_activity_at` and `unsubscribed_at` are the largest
 * ContactID, the latest time and the first unsubscription among the events that carry its address
 * and its list or no list (for a message whose events agree, all of them): a message whose events
 * give several lists or addresses counts under the largest of each and leaves every other pair an
 * event of it carries what those events say (`otherValues` in kit/message-facts.ts says why). If
 * no event carries the pair it counts under together, that row gets its counts alone. The API
 * lists the rows with `messages` > 0.
 */
export const listRecipientStatistics: Projection = {
  name: 'list-recipient-statistics',
  version: 5,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'list_recipient_stats',
      keys: [API_KEY, col('list_id', 'bigint'), col('email', 'text')],
      sums: bigints(...DISTINCT_SUMS, 'messages', 'named'),
      maxes: [col('list_recipient_id', 'bigint', true), col('contact_id', 'bigint', true), col('last_activity_at', 'bigint', true)],
      mins: [col('unsubscribed_at', 'bigint', true)],
      indexes: [['api_key_id', 'list_recipient_id'], ['api_key_id', 'contact_id'], ['api_key_id', 'last_activity_at'], ['api_key_id', 'unsubscribed_at']],
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    if (f.listId === '0' || f.email === '') return;
    const id = (listId: string, email: string) => stableId(`list-recipient:${f.apiKeyId}:${listId}:${email}`);
    if (otherValues(f, 'listId').length === 0 && otherValues(f, 'email').length === 0) {
      out.add('list_recipient_stats', [f.apiKeyId, f.listId, f.email], countedHere(f), [id(f.listId, f.email), f.contactId, f.lastActivity], [f.first.unsub?.time ?? null]);
      return;
    }
    // The pairs events carry (list, address), and per address what its events with no list say.
    const pairs = new Map<string, Part & { listId: string; email: string }>();
    const noList = new Map<string, Part>();
    for (const e of f.events) {
      if (e.email === '') continue;
      const unsub = e.type === 'unsub' ? e.time : null;
      const key = e.listId === '0' ? e.email : `${e.listId}\u001f${e.email}`;
      const p = e.listId === '0' ? noList.get(key) : pairs.get(key);
      if (p !== undefined) {
        p.contactId = maxId(p.contactId, e.contactId);
        if (e.time > p.last) p.last = e.time;
        if (unsub !== null && (p.unsub === null || unsub < p.unsub)) p.unsub = unsub;
      } else if (e.listId === '0') noList.set(key, { contactId: e.contactId, last: e.time, unsub });
      else pairs.set(key, { listId: e.listId, email: e.email, contactId: e.contactId, last: e.time, unsub });
    }
    let counted = false;
    for (const p of pairs.values()) {
      const n = noList.get(p.email);
      const unsub = n === undefined || n.unsub === null ? p.unsub : p.unsub === null ? n.unsub : Math.min(p.unsub, n.unsub);
      const here = p.listId === f.listId && p.email === f.email;
      counted ||= here;
      out.add(
        'list_recipient_stats',
        [f.apiKeyId, p.listId, p.email],
        here ? countedHere(f) : NAMED_ONLY,
        [id(p.listId, p.email), n === undefined ? p.contactId : maxId(p.contactId, n.contactId), n === undefined ? p.last : Math.max(p.last, n.last)],
        [unsub],
      );
    }
    if (!counted) out.add('list_recipient_stats', [f.apiKeyId, f.listId, f.email], [...distinctCounts(f), 1, 0], [id(f.listId, f.email), null, null], [null]);
  },
  sql: {
    // Messages whose events agree on list and address from their facts; the others pair by pair
    // (each with what the events of its address with no list say), and the pair they count under
    // when no event carries it.
    list_recipient_stats: `
      SELECT api_key_id, list_id, email, ${DISTINCT_SQL}, 1 AS messages, 1 AS named,
        ${stableIdSql(utf8(`'list-recipient:' || api_key_id || ':' || list_id || ':' || email`))} AS list_recipient_id,
        contact_id, last_activity AS last_activity_at, ${tOf('unsub')} AS unsubscribed_at
      FROM facts f WHERE list_id <> 0 AND email <> '' AND NOT (${DISAGREE})
      UNION ALL
      SELECT f.api_key_id, p.list_id, p.email, ${distinctWhereSql(HERE)}, (${HERE})::int AS messages, 1 AS named,
        ${stableIdSql(utf8(`'list-recipient:' || f.api_key_id || ':' || p.list_id || ':' || p.email`))} AS list_recipient_id,
        greatest(p.contact_id, n.contact_id) AS contact_id, greatest(p.last_activity, n.last_activity) AS last_activity_at,
        least(p.unsub, n.unsub) AS unsubscribed_at
      FROM facts f CROSS JOIN LATERAL (${partsSql('e.list_id <> 0', 'e.list_id, e.email')}) p
      LEFT JOIN LATERAL (${partsSql('e.list_id = 0 AND e.email = p.email', 'e.email')}) n ON true
      WHERE f.list_id <> 0 AND f.email <> '' AND (${DISAGREE})
      UNION ALL
      SELECT f.api_key_id, f.list_id, f.email, ${DISTINCT_SQL}, 1 AS messages, 0 AS named,
        ${stableIdSql(utf8(`'list-recipient:' || f.api_key_id || ':' || f.list_id || ':' || f.email`))} AS list_recipient_id,
        NULL::bigint AS contact_id, NULL::bigint AS last_activity_at, NULL::bigint AS unsubscribed_at
      FROM facts f
      WHERE f.list_id <> 0 AND f.email <> '' AND (${DISAGREE}) AND NOT EXISTS (
        SELECT 1 FROM log e WHERE e.api_key_id = f.api_key_id AND e.message_id = f.message_id AND e.type <> 'campaign' AND e.list_id = f.list_id AND e.email = f.email)`,
  },
};
