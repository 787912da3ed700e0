import type { LogEvent } from '../../projections/kit/types.js';
import type { Db } from '../db/connect.js';
import { byTimeThenId, EVENT_COLUMNS_TEXT, type EventSqlRow, type GroupKey, groupKeyOf, groupKeyString, toLogEvent } from './read-groups.js';
import { arrayLiteral } from './sql-arrays.js';
import { run, type Statement, statement } from './statements.js';

export interface BatchRead {
  /** The last position read. */
  readonly last: bigint;
  /** Events in the batch (after `from`, up to `last`). */
  readonly events: number;
  /** The groups the batch touches. */
  readonly keys: readonly GroupKey[];
  /** Every event of those groups up to `last` (by group key string), sorted by (time, EventID). */
  readonly groups: ReadonlyMap<string, readonly LogEvent[]>;
}

/**
 * The next `limit` events after `after` and every event of the groups they touch, up to the
 * last of them, in one statement (one round trip, one snapshot). The batch's own events are the
 * rows after `after`: every event up to the batch's last position belongs to a group the batch
 * touches.
 */
export async function readBatch(db: Db, after: bigint, limit: number): Promise<BatchRead | null> {
  const rows = await run<EventSqlRow>(db, batchStatement(limit), [String(after)]);
  if (rows.length === 0) return null;
  const groups = new Map<string, LogEvent[]>();
  const keys: GroupKey[] = [];
  let last = after;
  let events = 0;
  for (const r of rows) {
    const e = toLogEvent(r);
    if (e.position > after) {
      events += 1;
      if (e.position > last) last = e.position;
    }
    if (collect(groups, e)) keys.push(groupKeyOf(e));
  }
  for (const list of groups.values()) list.sort(byTimeThenId);
  return { last, events, keys, groups };
}

/** Adds an event to its group's list; true when the list is new. */
export function collect(groups: Map<string, LogEvent[]>, e: LogEvent): boolean {
  const id = groupKeyString(groupKeyOf(e));
  const list = groups.get(id);
  if (list !== undefined) {
    list.push(e);
    return false;
  }
  groups.set(id, [e]);
  return true;
}

const batchStatements = new Map<number, Statement>();

function checkedLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`bad batch size ${limit}`);
  return limit;
}

/**
 * The batch's events and every earlier event of the groups they touch, as a prepared statement
 * per batch size (a literal, so that a generic plan still knows the batch is small).
 */
function batchStatement(limit: number): Statement {
  let s = batchStatements.get(limit);
  if (s === undefined) {
    s = statement(`
      WITH b AS (SELECT position, type, api_key_id, message_id, campaign_id FROM events WHERE position > $1::text::bigint ORDER BY position LIMIT ${checkedLimit(limit)}),
      upto AS (SELECT max(position) AS p FROM b),
      m AS (SELECT DISTINCT api_key_id AS m_api_key_id, message_id AS m_message_id FROM b WHERE type <> 'campaign'),
      c AS (SELECT DISTINCT api_key_id AS c_api_key_id, campaign_id AS c_campaign_id FROM b WHERE type = 'campaign')
      SELECT ${EVENT_COLUMNS_TEXT} FROM events JOIN m ON events.api_key_id = m_api_key_id AND events.message_id = m_message_id
        WHERE events.position <= (SELECT p FROM upto) AND events.type <> 'campaign'
      UNION ALL
      SELECT ${EVENT_COLUMNS_TEXT} FROM events JOIN c ON events.api_key_id = c_api_key_id AND events.campaign_id = c_campaign_id
        WHERE events.position <= (SELECT p FROM upto) AND events.type = 'campaign'`);
    batchStatements.set(limit, s);
  }
  return s;
}

/** The next `limit` events after `after`, in position order (the live projector's cached path). */
export async function readEventsAfter(db: Db, after: bigint, limit: number): Promise<LogEvent[]> {
  let s = afterStatements.get(limit);
  if (s === undefined) {
    s = statement(`SELECT ${EVENT_COLUMNS_TEXT} FROM events WHERE position > $1::text::bigint ORDER BY position LIMIT ${checkedLimit(limit)}`);
    afterStatements.set(limit, s);
  }
  return (await run<EventSqlRow>(db, s, [String(after)])).map(toLogEvent);
}

const afterStatements = new Map<number, Statement>();

const HISTORY = statement(`
  SELECT ${EVENT_COLUMNS_TEXT} FROM events JOIN unnest($1::text::bigint[], $2::text::numeric[]) AS g(m_api_key_id, m_message_id)
    ON events.api_key_id = m_api_key_id AND events.message_id = m_message_id
    WHERE events.position <= $5::text::bigint AND events.type <> 'campaign'
  UNION ALL
  SELECT ${EVENT_COLUMNS_TEXT} FROM events JOIN unnest($3::text::bigint[], $4::text::bigint[]) AS g(c_api_key_id, c_campaign_id)
    ON events.api_key_id = c_api_key_id AND events.campaign_id = c_campaign_id
    WHERE events.position <= $5::text::bigint AND events.type = 'campaign'`);

/** Every event of `keys`' groups up to `upTo`, by group key string, each sorted by (time, EventID). */
export async function readGroupHistory(db: Db, keys: readonly GroupKey[], upTo: bigint): Promise<Map<string, LogEvent[]>> {
  const messages = keys.filter((k) => k.kind === 'message');
  const campaigns = keys.filter((k) => k.kind === 'campaign');
  const params = [
    arrayLiteral('bigint', messages.map((k) => k.apiKeyId)),
    arrayLiteral('numeric', messages.map((k) => k.id)),
    arrayLiteral('bigint', campaigns.map((k) => k.apiKeyId)),
    arrayLiteral('bigint', campaigns.map((k) => k.id)),
    String(upTo),
  ];
  const groups = new Map<string, LogEvent[]>();
  for (const r of await run<EventSqlRow>(db, HISTORY, params)) collect(groups, toLogEvent(r));
  for (const list of groups.values()) list.sort(byTimeThenId);
  return groups;
}
