import { type Kysely, sql } from 'kysely';
import { z } from 'zod';
import { userAgentId } from '../../../projections/click-statistics.js';
import type { Database } from '../../db/schema.js';
import { messageStateById } from '../../events/enrich/index.js';
import { apiErrors } from '../../http/errors.js';
import { listSchema } from '../conventions/paging.js';
import { int64 } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';
import { MAX_UINT64, itemId } from './item-id.js';

/**
 * /messagehistory/{MessageID} and /messagehistory?Message={MessageID}: a message's events, oldest
 * first, read straight from the event log (indexed by tenant and message). The list form is
 * Mailjet's (its OpenAPI lists `Message` as the filter) and takes Limit / Offset / countOnly /
 * Sort; the item form answers every event, or 404 when the log has none for that message (or
 * they are another tenant's).
 *
 * Choices where the reference is silent:
 * - EventType uses Mailjet's history words (`sent`, `opened`, `clicked`, `bounced`, `blocked`,
 *   `unsub`, `spam`) and, for the two pipeline events Mailjet's history enum does not name,
 *   `queued` and `deferred` — the words of the message's Status for those stages — rather than
 *   dropping them (a message that is only queued would otherwise have no history) or passing a
 *   deferral off as a bounce;
 * - State is the message-state text of a bounce, block or deferral (the webhook `error` words,
 *   e.g. "user unknown"; the raw error text when it matches no state), "" otherwise;
 * - Comment is the raw SMTP text the event carried: a bounce's `comment`, else `smtp_reply`
 *   (sent, deferred); "" when none;
 * - Useragent is the raw user agent of an open, click or unsub; UseragentID the id of the parsed
 *   user agent, the same id /clickstatistics and /openinformation give: an open or click has
 *   one even when it carried no user agent (that of the empty agent, as those routes give), any
 *   other event 0 unless it carried one;
 * - order: event time, then pipeline stage (queued, deferred, sent, bounce / blocked, open, click,
 *   spam, unsub), then EventID, so it never depends on arrival order. Sort: EventAt, both
 *   directions;
 * - `Message` (alias `MessageID`) is required by the list form: a 400 names it when missing.
 */

const query = listSchema({ Message: int64().optional().meta({ description: 'The message id (required)' }) });

const record = z.object({
  Comment: z.string(),
  EventAt: z.number().int().meta({ description: 'Unix seconds' }),
  EventType: z.string().meta({ description: 'queued, deferred, sent, opened, clicked, bounced, blocked, unsub, spam' }),
  State: z.string(),
  Useragent: z.string(),
  UseragentID: z.number().int(),
});

interface Row {
  type: string;
  event_time: bigint;
  error: string | null;
  state_id: number | null;
  ua_platform: string | null;
  ua_client: string | null;
  agent: string | null;
  comment: string | null;
}

const EVENT_TYPES: Readonly<Record<string, string>> = { open: 'opened', click: 'clicked', bounce: 'bounced' };
const FAILURES = new Set(['bounce', 'blocked', 'deferred']);
const STAGE = sql`CASE e.type WHEN 'queued' THEN 1 WHEN 'deferred' THEN 2 WHEN 'sent' THEN 3 WHEN 'bounce' THEN 4 WHEN 'blocked' THEN 4
  WHEN 'open' THEN 5 WHEN 'click' THEN 6 WHEN 'spam' THEN 7 WHEN 'unsub' THEN 8 ELSE 9 END`;
const TIE_BREAK = [sql`e.event_time`, STAGE, sql`e.event_id`];
const COLUMNS = sql`e.type, e.event_time, e.error, e.state_id, e.ua_platform, e.ua_client, e.payload->>'agent' AS agent,
  coalesce(e.payload->>'comment', e.payload->>'smtp_reply') AS comment`;
const SORTABLE = { EventAt: sql.ref('e.event_time') };

const ofMessage = (apiKeyId: string, messageId: bigint) => [
  tenant(apiKeyId, sql.ref('e.api_key_id')),
  sql`e.message_id = ${messageId.toString()}::numeric`,
  sql`e.type <> 'campaign'`,
];

export const messagehistoryResource = defineResource({
  name: 'messagehistory',
  description: "A message's events, oldest first, from the event log.",
  query,
  record,
  aliases: { messageid: 'message' },
  async list({ db, principal, query: q, page }) {
    if (q.Message === undefined) throw apiErrors.badRequest('Missing parameter Message: messagehistory lists the events of one message; give its id in Message');
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`events e`, columns: COLUMNS, where: ofMessage(principal.apiKeyId, q.Message), orderBy: orderBy('messagehistory', q.Sort, SORTABLE, TIE_BREAK) },
      page,
    );
    return { rows: rows.map(toWire), total };
  },
  items: [
    {
      path: ':id',
      description: 'Every event of one message, oldest first.',
      async find({ db, principal }, params) {
        const ID = itemId(params['id'] ?? '', 'ID', MAX_UINT64);
        if (ID === null) return [];
        return (await historyOf(db, principal.apiKeyId, ID)).map(toWire);
      },
    },
  ],
});

async function historyOf(db: Kysely<Database>, apiKeyId: string, messageId: bigint): Promise<Row[]> {
  const where = sql.join(ofMessage(apiKeyId, messageId), sql` AND `);
  const { rows } = await sql<Row>`SELECT ${COLUMNS} FROM events e WHERE ${where} ORDER BY ${sql.join(TIE_BREAK)}`.execute(db);
  return rows;
}

function toWire(r: Row): Record<string, unknown> {
  const agent = r.agent ?? '';
  const hasAgent = r.type === 'open' || r.type === 'click' || agent !== '';
  const state = FAILURES.has(r.type) ? (messageStateById(r.state_id ?? 0)?.error ?? r.error ?? '') : '';
  return {
    Comment: r.comment ?? '',
    EventAt: Number(r.event_time),
    EventType: EVENT_TYPES[r.type] ?? r.type,
    State: state,
    Useragent: agent,
    UseragentID: hasAgent ? Number(userAgentId(r.ua_platform ?? '', r.ua_client ?? '')) : 0,
  };
}
