import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { LogEvent } from '../../projections/kit/types.js';
import type { EventType } from '../events/schema.js';
import { FOLDED_EMAIL_SQL } from './read-groups.js';

/**
 * The rebuild's reader on real Postgres: one `COPY (SELECT …) TO STDOUT` over the whole log,
 * parsed line by line. Several times faster than row-by-row query results for millions of rows
 * (no per-field type parsers, no per-row objects from the driver).
 */

const COLUMNS = `position, event_id, type, event_time, api_key_id, coalesce(message_id::text, ''), campaign_id, contact_id, list_id, sender_id,
  ${FOLDED_EMAIL_SQL}, recipient_domain, esp, sender, sender_domain, custom_campaign, url, ua_platform, ua_client,
  CASE WHEN type = 'open' THEN payload->>'agent' END, geo, hard_bounce, blocked, error_related_to, error, state_id,
  CASE WHEN type = 'campaign' THEN payload::text END`;

/**
 * Every event up to `upTo` in the order of the log's message index (`events_message_idx`: API
 * key, then message id, events without one last), a chunk at a time: a rebuild can fold each
 * message as soon as the next one begins, holding one message's events rather than the log's.
 * The index is walked rather than the log sorted, so the first rows come at once and Postgres's
 * work overlaps the fold (on a cached 1.9M-event log, a COPY of seven columns to /dev/null took
 * 3.4 s this way against 2.1 s in position order).
 * A log much larger than memory makes that walk read the table in random order.
 */
export async function* copyEventsByMessage(pool: pg.Pool, upTo: bigint): AsyncGenerator<LogEvent[]> {
  const client = await pool.connect();
  let finished = false;
  try {
    await client.query('BEGIN; SET LOCAL enable_sort = off');
    const stream = client.query(copyTo(`COPY (SELECT ${COLUMNS} FROM events WHERE position <= ${upTo} ORDER BY api_key_id, message_id) TO STDOUT`));
    let rest = '';
    const decoder = new TextDecoder();
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const text = rest + decoder.decode(chunk, { stream: true });
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      const events = new Array<LogEvent>(lines.length);
      for (let i = 0; i < lines.length; i++) events[i] = parseLine(lines[i] as string);
      yield events;
    }
    if (rest !== '') yield [parseLine(rest)];
    await client.query('COMMIT');
    finished = true;
  } finally {
    // Left early (an error, or the reader stopped), the connection may be mid-COPY: discard it.
    client.release(finished ? undefined : true);
  }
}

const interned = new Map<string, string>();
/** Low-cardinality strings (types, ESPs, platforms, countries…) shared rather than copied per row. */
function intern(s: string): string {
  const found = interned.get(s);
  if (found !== undefined) return found;
  if (interned.size < 50_000) interned.set(s, s);
  return s;
}

function text(v: string | undefined): string {
  if (v === undefined || v === '\\N') return '';
  return v.includes('\\') ? unescapeCopy(v) : v;
}

function unescapeCopy(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === 't' ? '\t' : c === 'n' ? '\n' : c === 'r' ? '\r' : c === 'b' ? '\b' : c === 'f' ? '\f' : c === 'v' ? '\v' : c));
}

function parseLine(line: string): LogEvent {
  const f = line.split('\t');
  const payload = f[26];
  return {
    position: BigInt(f[0] as string),
    eventId: text(f[1]),
    type: intern(f[2] as string) as EventType,
    time: Number(f[3]),
    apiKeyId: intern(f[4] as string),
    messageId: f[5] as string,
    campaignId: intern(f[6] as string),
    contactId: f[7] as string,
    listId: intern(f[8] as string),
    senderId: intern(f[9] as string),
    email: text(f[10]),
    recipientDomain: intern(text(f[11])),
    esp: intern(text(f[12])),
    sender: intern(text(f[13])),
    senderDomain: intern(text(f[14])),
    customCampaign: intern(text(f[15])),
    url: text(f[16]),
    uaPlatform: intern(text(f[17])),
    uaClient: intern(text(f[18])),
    agent: text(f[19]),
    geo: intern(text(f[20])),
    hardBounce: f[21] === 't',
    blocked: f[22] === 't',
    errorRelatedTo: intern(text(f[23])),
    error: intern(text(f[24])),
    stateId: f[25] === '\\N' || f[25] === undefined ? null : Number(f[25]),
    campaignPayload: payload === undefined || payload === '\\N' ? null : (JSON.parse(text(payload)) as Record<string, unknown>),
  };
}
