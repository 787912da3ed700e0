import { OUTCOMES, type Outcome, PIPELINE_RANK } from './message-facts.js';
import { RESOLUTIONS } from './time.js';

/**
 * The set-based side of the read models: what a rebuild runs instead of folding the log group by
 * group (`src/projector/set-rebuild.ts`). Each projection's `sql` gives, per table, one SELECT
 * over three relations the rebuild provides:
 *
 * - `log`: the events up to the position being rebuilt (the `events` table's columns);
 * - `facts`: one row per message, {@link MessageFacts} in SQL ({@link FACTS_SELECT});
 * - `engagement`: the log's opens, clicks, spam reports, unsubscribes, bounces and blocks (the
 *   few events most tables list or count one by one), each with its message's facts
 *   ({@link ENGAGEMENT_SELECT}): a small copy, so no table's SQL scans the whole log or joins it.
 *
 * A counter table's SELECT gives contributions (its key, sum, max and min columns, by name; any
 * number of rows per key), which the rebuild adds up by key, dropping rows whose sums are all
 * zero, as the fold does. A row table's SELECT gives its rows. Either must give exactly what the
 * projection's `project` gives for the same log: the replay tests rebuild both ways and compare.
 *
 * Text is compared as the fold compares it (`COLLATE "C"`: by code point, which is the fold's
 * UTF-16 order except between U+E000–U+FFFF and characters beyond U+FFFF).
 */

/** Column of `facts` holding the time of an outcome's first event (null: none). */
export const tOf = (o: Outcome): string => `t_${snake(o)}`;

/** The outcomes whose number of events a projection uses (the others: only whether there is one). */
const COUNTED = ['sent', 'deferred', 'bounced', 'opened', 'clicked', 'spam', 'unsub'] as const satisfies readonly Outcome[];
type Counted = (typeof COUNTED)[number];

/** Column of `facts` holding the number of events of an outcome. */
export const nOf = (o: Counted): string => `n_${snake(o)}`;

function snake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Each event's kind as a small number (`kind` below), computed once per event: the outcome
 * filters of the facts then compare integers, not text. A bounce is 4 when hard, 5 when soft.
 */
const KIND_SQL = `CASE type WHEN 'queued' THEN 1 WHEN 'sent' THEN 2 WHEN 'deferred' THEN 3 WHEN 'bounce' THEN CASE WHEN hard_bounce THEN 4 ELSE 5 END
  WHEN 'blocked' THEN 6 WHEN 'open' THEN 7 WHEN 'click' THEN 8 WHEN 'spam' THEN 9 WHEN 'unsub' THEN 10 ELSE 0 END`;

/** The kinds each outcome counts (see `outcomesOf` in message-facts.ts). */
const OUTCOME_KINDS: Record<Outcome, string> = {
  queued: 'kind = 1',
  sent: 'kind = 2',
  deferred: 'kind = 3',
  bounced: 'kind IN (4, 5)',
  hardBounced: 'kind = 4',
  softBounced: 'kind = 5',
  blocked: 'kind = 6',
  opened: 'kind = 7',
  clicked: 'kind = 8',
  spam: 'kind = 9',
  unsub: 'kind = 10',
};

/** Pipeline rank of each event type (`PIPELINE_RANK`), for the latest event of a message. */
const RANK_SQL = `CASE type ${Object.entries(PIPELINE_RANK).map(([type, rank]) => `WHEN '${type}' THEN ${rank}`).join(' ')} ELSE 0 END`;

const ID_DIMS = ['campaign_id', 'contact_id', 'list_id', 'sender_id'];
/** The dimensions whose disagreement the read models with one-way columns care about, with their "none". */
const MIXED = [['campaign_id', '0'], ['list_id', '0'], ['email', "''"]] as const;
const TEXT_DIMS = ['email', 'recipient_domain', 'esp', 'sender', 'sender_domain', 'custom_campaign'];

/**
 * `facts`: {@link MessageFacts} of every message in `log`, one row each:
 * - `campaign_id`, `contact_id`, `list_id`, `sender_id` (0: none), `email`, `recipient_domain`,
 *   `esp`, `sender`, `sender_domain`, `custom_campaign` ('': none): the largest value its events carry;
 * - `mixed_campaign_id`, `mixed_list_id`, `mixed_email`: whether its events give that dimension
 *   more than one non-empty value (a column, not an expression, so that the planner has its
 *   statistics: few messages have one, and {@link otherValuesSql} looks each of them up);
 * - `message_time`: smallest time of its delivery events (null: not processed);
 * - `last_activity`: largest event time; `events`: how many it has;
 * - per outcome `t_<outcome>`, the time of its first event (null: none), and for those counted
 *   (`COUNTED`) `n_<outcome>`, its number of events;
 * - `latest`: time × 16 + pipeline rank of its latest event (`RANK_SQL`).
 * The inner query's `OFFSET 0` keeps it from being merged into the outer one, which would
 * compute `kind` again in every filter.
 */
export const FACTS_SELECT = `
  SELECT api_key_id, message_id,
    ${ID_DIMS.map((c) => `coalesce(max(${c}), 0) AS ${c}`).join(', ')},
    ${TEXT_DIMS.map((c) => `coalesce(max(${c} COLLATE "C"), '') AS ${c}`).join(', ')},
    ${MIXED.map(([c, none]) => `coalesce(min(${c}) FILTER (WHERE ${c} <> ${none}) <> max(${c}), false) AS mixed_${c}`).join(', ')},
    min(event_time) FILTER (WHERE kind BETWEEN 1 AND 6) AS message_time,
    max(event_time) AS last_activity,
    count(*)::int AS events,
    ${OUTCOMES.map((o) => `min(event_time) FILTER (WHERE ${OUTCOME_KINDS[o]}) AS ${tOf(o)}`).join(', ')},
    ${COUNTED.map((o) => `count(*) FILTER (WHERE ${OUTCOME_KINDS[o]})::int AS ${nOf(o)}`).join(', ')},
    max(event_time * 16 + rank) AS latest
  FROM (
    SELECT api_key_id, message_id, event_time, ${[...ID_DIMS, ...TEXT_DIMS].join(', ')}, ${KIND_SQL} AS kind, ${RANK_SQL} AS rank
    FROM log WHERE type <> 'campaign' OFFSET 0
  ) e
  GROUP BY api_key_id, message_id`;

/**
 * `engagement` (see above). The event's own columns (`position`, `event_id`, `type`,
 * `event_time`, `url`, `ua_platform`, `ua_client`, `geo`, `hard_bounce`, `blocked`,
 * `error_related_to`, `error`, `state_id`; `agent`: an open's raw user agent; '' for none where
 * the fold reads '') beside its message's: `campaign_id`, `list_id`, `sender_id`, `sender`,
 * `sender_domain`, `custom_campaign`, `contact_id`, `message_time`, `t_sent` as in `facts` (not
 * the event's own values: a message's numbers go by its facts).
 */
export const ENGAGEMENT_SELECT = `
  SELECT e.api_key_id, e.message_id, e.position, e.event_id, e.type, e.event_time, coalesce(e.url, '') AS url,
    coalesce(e.ua_platform, '') AS ua_platform, coalesce(e.ua_client, '') AS ua_client,
    CASE WHEN e.type = 'open' THEN coalesce(e.payload ->> 'agent', '') ELSE '' END AS agent, coalesce(e.geo, '') AS geo,
    coalesce(e.hard_bounce, false) AS hard_bounce, coalesce(e.blocked, false) AS blocked,
    coalesce(e.error_related_to, '') AS error_related_to, coalesce(e.error, '') AS error, e.state_id,
    ${['campaign_id', 'list_id', 'sender_id', 'sender', 'sender_domain', 'custom_campaign', 'contact_id', 'message_time', 't_sent'].map((c) => `f.${c}`).join(', ')}
  FROM log e JOIN facts f USING (api_key_id, message_id)
  WHERE e.type IN ('open', 'click', 'spam', 'unsub', 'bounce', 'blocked')`;

/** 1 when the message has an event of the outcome (`has` in distinct.ts). */
export const hasSql = (o: Outcome): string => `(${tOf(o)} IS NOT NULL)::int`;

/** 1 when the message is processed (has a message time). */
export const PROCESSED_SQL = '(message_time IS NOT NULL)::int';

/** The distinct-message counts of `DISTINCT_SUMS` (distinct.ts): each one's expression over `facts` and its column. */
const DISTINCT_PARTS: readonly (readonly [string, string])[] = [
  [PROCESSED_SQL, 'processed'],
  [hasSql('queued'), 'queued'],
  [hasSql('sent'), 'delivered'],
  [hasSql('deferred'), 'deferred'],
  [hasSql('bounced'), 'bounced'],
  [hasSql('hardBounced'), 'hard_bounced'],
  [hasSql('softBounced'), 'soft_bounced'],
  [hasSql('blocked'), 'blocked'],
  [hasSql('opened'), 'opened'],
  [hasSql('clicked'), 'clicked'],
  [hasSql('spam'), 'spam'],
  [hasSql('unsub'), 'unsub'],
];

/** The distinct-message counts of `DISTINCT_SUMS` (distinct.ts), named as its columns. */
export const DISTINCT_SQL = DISTINCT_PARTS.map(([expr, name]) => `${expr} AS ${name}`).join(', ');

/** The same counts where `condition` holds (the row the message counts in), zeros elsewhere (rows it only names). */
export const distinctWhereSql = (condition: string): string =>
  DISTINCT_PARTS.map(([expr, name]) => `CASE WHEN ${condition} THEN ${expr} ELSE 0 END AS ${name}`).join(', ');

/** The message dimensions of `DIM_COLUMNS`, from `facts` aliased `alias`. */
export const dimsSql = (alias: string): string =>
  ['campaign_id', 'list_id', 'sender_id', 'sender', 'sender_domain', 'custom_campaign'].map((c) => `${alias}.${c}`).join(', ');

/** `stableId` (ids.ts) of UTF-8 bytes given as a bytea expression. */
export const stableIdSql = (bytes: string): string => `(('x' || left(encode(sha256(${bytes}), 'hex'), 12))::bit(48)::bigint + 1)`;

/** A text expression as UTF-8 bytes. */
export const utf8 = (textExpr: string): string => `convert_to(${textExpr}, 'UTF8')`;

/** `userAgentId(platform, client)` (click-statistics.ts): stableId of 'ua:' + platform + NUL + client. */
export const userAgentIdSql = (platform: string, client: string): string =>
  stableIdSql(`${utf8(`'ua:' || ${platform}`)} || '\\x00'::bytea || ${utf8(client)}`);

/** Start of the slice holding `time` (sliceStart in time.ts; times are never negative). */
export const sliceSql = (time: string, seconds: number | string): string => `(${time} - ${time} % ${seconds})`;

/** The statistics resolutions as a VALUES list of (code, seconds). */
export const RESOLUTIONS_SQL = `(VALUES ${RESOLUTIONS.map((r) => `('${r.code}', ${r.seconds})`).join(', ')})`;

/**
 * Every non-empty value the events of the message in `facts` row `f` give a dimension, each once,
 * as a subquery for `LATERAL` (`otherValues` in message-facts.ts gives those but the largest).
 * Only worth reading for a message whose events disagree on it ({@link disagreeSql}): one look
 * up the log's (tenant, message) index each. (contact-statistics.ts and
 * list-recipient-statistics.ts look up more than the values, in the same way.)
 */
export const otherValuesSql = (column: 'campaign_id' | 'list_id' | 'email'): string =>
  `(SELECT DISTINCT e.${column} FROM log e WHERE e.api_key_id = f.api_key_id AND e.message_id = f.message_id AND e.type <> 'campaign' AND e.${column} <> ${column === 'email' ? "''" : '0'})`;

/** Whether the events of the message in `facts` row `f` give a dimension more than one value. */
export const disagreeSql = (column: 'campaign_id' | 'list_id' | 'email'): string => `f.mixed_${column}`;

/** Zeros named as columns: a contribution that only names a row. */
export const zerosSql = (columns: readonly string[]): string => columns.map((c) => `0 AS ${c}`).join(', ');
