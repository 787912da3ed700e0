import { API_KEY, bigints, col } from './kit/columns.js';
import { delayOf, type MessageFacts, messageFacts, OUTCOMES, type Outcome } from './kit/message-facts.js';
import { nOf, RESOLUTIONS_SQL, sliceSql, tOf } from './kit/sql.js';
import { RESOLUTIONS, sliceStart } from './kit/time.js';
import type { Group, LogEvent, Output, Projection } from './kit/types.js';

/**
 * /statcounters: per source (APIKey, Campaign, List, Sender) × timing × resolution × slice.
 * - Lifetime (timing 'L', resolution 'L', slice 0) counts everything.
 * - Message timing ('M'): everything in the slice of the message time; a message with no
 *   delivery event yet is held back.
 * - Event timing ('E'): each event in the slice of its own time; a distinct-message count in the
 *   slice of the event that made it distinct (first open, first click…); Total in the slice of
 *   the message time (its first delivery event).
 * List sources exist only as Lifetime and Sender sources only with Message timing, as Mailjet
 * allows; those rows are not built.
 */

const SUMS = bigints(
  'total',
  'message_sent',
  'message_queued',
  'message_deferred',
  'message_blocked',
  'message_hard_bounced',
  'message_soft_bounced',
  'message_opened',
  'message_clicked',
  'message_spam',
  'message_unsub',
  'event_opened',
  'event_clicked',
  'event_spam',
  'event_unsub',
  'event_open_delay',
  'event_click_delay',
);
const N = SUMS.length;
/** The position of a sum column in a counter row's vector. */
function at(name: string): number {
  const i = SUMS.findIndex((c) => c.name === name);
  if (i < 0) throw new Error(`statcounters: no sum column ${name}`);
  return i;
}
const TOTAL = at('total');
/** Distinct-message flags → their sum column. */
const FLAG_INDEX: Partial<Record<Outcome, number>> = {
  sent: at('message_sent'),
  queued: at('message_queued'),
  deferred: at('message_deferred'),
  blocked: at('message_blocked'),
  hardBounced: at('message_hard_bounced'),
  softBounced: at('message_soft_bounced'),
  opened: at('message_opened'),
  clicked: at('message_clicked'),
  spam: at('message_spam'),
  unsub: at('message_unsub'),
};
/** Events counted one by one → their sum column. */
const EVENT_INDEX: Partial<Record<LogEvent['type'], number>> = { open: at('event_opened'), click: at('event_clicked'), spam: at('event_spam'), unsub: at('event_unsub') };
const OPEN_DELAY = at('event_open_delay');
const CLICK_DELAY = at('event_click_delay');

export const statcounters: Projection = {
  name: 'statcounters',
  version: 3,
  groups: ['message'],
  tables: [
    {
      kind: 'counters',
      name: 'statcounters',
      keys: [API_KEY, col('source_type', 'text'), col('source_id', 'bigint'), col('timing', 'text'), col('resolution', 'text'), col('timeslice', 'bigint')],
      sums: SUMS,
    },
  ],
  project(group: Group, out: Output): void {
    const f = messageFacts(group);
    const sources: Source[] = [['A', '0', true]];
    if (f.campaignId !== '0') sources.push(['C', f.campaignId, true]);
    if (f.senderId !== '0') sources.push(['S', f.senderId, false]);
    const lifetime = messageVector(f);
    for (const source of sources) emit(out, f.apiKeyId, source, 'L', 'L', 0, lifetime);
    if (f.listId !== '0') emit(out, f.apiKeyId, ['L', f.listId, false], 'L', 'L', 0, lifetime);
    for (const source of sources) {
      if (f.messageTime !== null) {
        for (const r of RESOLUTIONS) emit(out, f.apiKeyId, source, 'M', r.code, sliceStart(f.messageTime, r.seconds), lifetime);
      }
    }
    // Event timing (Sender sources have Message timing only).
    for (const r of RESOLUTIONS) {
      const slices = eventTimed(f, r.seconds);
      for (const source of sources) {
        if (!source[2]) continue;
        for (const [slice, v] of slices) emit(out, f.apiKeyId, source, 'E', r.code, slice, v);
      }
    }
  },
  sql: { statcounters: statcountersSql() },
};

/** A counter source: type, id, and whether it has Event timing. */
type Source = [string, string, boolean];

function emit(out: Output, apiKeyId: string, source: Source, timing: string, resolution: string, slice: number, v: number[]): void {
  out.add('statcounters', [apiKeyId, source[0], source[1], timing, resolution, slice], v);
}

/** Everything the message contributes, in one vector (Lifetime and Message timing). */
function messageVector(f: MessageFacts): number[] {
  const v = new Array<number>(N).fill(0);
  if (f.messageTime !== null) v[TOTAL] = 1;
  for (const o of OUTCOMES) {
    const i = FLAG_INDEX[o];
    if (i !== undefined && f.count[o] > 0) v[i] = 1;
  }
  for (const e of f.events) {
    const i = EVENT_INDEX[e.type];
    if (i !== undefined) v[i] = (v[i] ?? 0) + 1;
  }
  v[OPEN_DELAY] = delayOf(f, f.first.opened) ?? 0;
  v[CLICK_DELAY] = delayOf(f, f.first.clicked) ?? 0;
  return v;
}

/** Event timing: slice start → vector, for one resolution. */
function eventTimed(f: MessageFacts, seconds: number): Map<number, number[]> {
  const slices = new Map<number, number[]>();
  if (f.messageTime !== null) vectorAt(slices, f.messageTime, seconds)[TOTAL] = 1;
  for (const o of OUTCOMES) {
    const i = FLAG_INDEX[o];
    const e = f.first[o];
    if (i !== undefined && e !== null) vectorAt(slices, e.time, seconds)[i] = 1;
  }
  for (const e of f.events) {
    const i = EVENT_INDEX[e.type];
    if (i === undefined) continue;
    const v = vectorAt(slices, e.time, seconds);
    v[i] = (v[i] ?? 0) + 1;
  }
  const openDelay = delayOf(f, f.first.opened);
  if (openDelay !== null && f.first.opened !== null) vectorAt(slices, f.first.opened.time, seconds)[OPEN_DELAY] = openDelay;
  const clickDelay = delayOf(f, f.first.clicked);
  if (clickDelay !== null && f.first.clicked !== null) vectorAt(slices, f.first.clicked.time, seconds)[CLICK_DELAY] = clickDelay;
  return slices;
}

/** The vector of the slice holding `time`, created on first use. */
function vectorAt(slices: Map<number, number[]>, time: number, seconds: number): number[] {
  const s = sliceStart(time, seconds);
  let v = slices.get(s);
  if (v === undefined) slices.set(s, (v = new Array<number>(N).fill(0)));
  return v;
}

/**
 * The same counters set-based. Sums add up, so they are first added up per 5-minute slice (the
 * finest resolution; an hour and a day are whole numbers of them), and the rows of every source
 * and resolution are made from those partial sums:
 * - `shapes`: messages grouped by campaign, sender, list and the slice of their message time and
 *   of the first event of each outcome (a tenth as many rows as messages on the bench's log),
 *   with their number and the sums of their event counts and delays;
 * - `by_message_time`: the shapes' vectors by the slice of their message time (null: not
 *   processed), for Lifetime and Message timing;
 * - `by_event_time`: Event timing's parts, each in the slice of its own time: Total at the
 *   message time, each flag at its outcome's first event, the delays at the first open / click
 *   (from the shapes, one row per shape and part), and the event counts at each event's time.
 */
function statcountersSql(): string {
  const names = SUMS.map((c) => c.name);
  const flags = Object.entries(FLAG_INDEX) as [Outcome, number][];
  const slice = (o: Outcome) => `s_${tOf(o)}`;
  // The event-count columns: index → event type; each type's count in the facts.
  const eventTypeAt = new Map(Object.entries(EVENT_INDEX).map(([type, i]) => [i, type]));
  const countOf = { open: nOf('opened'), click: nOf('clicked'), spam: nOf('spam'), unsub: nOf('unsub') } as Record<string, string>;
  const shapeKeys = ['api_key_id', 'campaign_id', 'sender_id', 'list_id', 's_time', ...flags.map(([o]) => slice(o))];
  const shapes = `
    SELECT api_key_id, campaign_id, sender_id, list_id, ${sliceSql('message_time', 300)} AS s_time,
      ${flags.map(([o]) => `${sliceSql(tOf(o), 300)} AS ${slice(o)}`).join(', ')},
      count(*) AS messages,
      ${Object.entries(EVENT_INDEX).map(([type, i]) => `sum(${countOf[type]}) AS ${names[i]}`).join(', ')},
      sum(${tOf('opened')} - message_time) AS open_delay, sum(${tOf('clicked')} - message_time) AS click_delay
    FROM facts GROUP BY ${shapeKeys.join(', ')}`;
  // A shape's vector (Lifetime and Message timing).
  const vector = names.map((n, i) => {
    if (i === TOTAL) return `sum(CASE WHEN s_time IS NOT NULL THEN messages ELSE 0 END) AS ${n}`;
    if (i === OPEN_DELAY) return `coalesce(sum(open_delay), 0) AS ${n}`;
    if (i === CLICK_DELAY) return `coalesce(sum(click_delay), 0) AS ${n}`;
    const flag = flags.find(([, j]) => j === i);
    if (flag !== undefined) return `sum(CASE WHEN ${slice(flag[0])} IS NOT NULL THEN messages ELSE 0 END) AS ${n}`;
    return `sum(${n}) AS ${n}`;
  });
  // Event timing parts of a shape: (slice, index of the column, value); a delay is null, and
  // left out, when the messages have no message time.
  const parts = [`(s_time, ${TOTAL}, messages)`, ...flags.map(([o, i]) => `(${slice(o)}, ${i}, messages)`), `(${slice('opened')}, ${OPEN_DELAY}, open_delay)`, `(${slice('clicked')}, ${CLICK_DELAY}, click_delay)`];
  const sums = names.map((n) => `sum(${n}) AS ${n}`).join(', ');
  const pivot = names.map((n, i) => `coalesce(sum(value) FILTER (WHERE i = ${i}), 0) AS ${n}`).join(', ');
  const eventCounts = names.map((n, i) => {
    const type = eventTypeAt.get(i);
    return type === undefined ? `0 AS ${n}` : `count(*) FILTER (WHERE e.type = '${type}') AS ${n}`;
  });
  const sources = (withSender: boolean) =>
    `CROSS JOIN LATERAL (VALUES ('A', 0::bigint, true), ('C', campaign_id, campaign_id <> 0)${withSender ? ", ('S', sender_id, sender_id <> 0)" : ''}) src(type, id, used)`;
  return `
    WITH shapes AS MATERIALIZED (${shapes}
    ), by_message_time AS (
      SELECT api_key_id, campaign_id, sender_id, list_id, s_time AS slice, ${vector.join(', ')}
      FROM shapes GROUP BY 1, 2, 3, 4, 5
    ), by_event_time AS (
      SELECT api_key_id, campaign_id, slice, ${sums} FROM (
        SELECT api_key_id, campaign_id, slice, ${pivot} FROM (
          SELECT s.api_key_id, s.campaign_id, p.slice, p.i, sum(p.value) AS value
          FROM shapes s CROSS JOIN LATERAL (VALUES ${parts.join(', ')}) p(slice, i, value)
          WHERE p.slice IS NOT NULL AND p.value IS NOT NULL
          GROUP BY 1, 2, 3, 4
        ) by_part GROUP BY 1, 2, 3
        UNION ALL
        SELECT api_key_id, campaign_id, ${sliceSql('event_time', 300)} AS slice, ${eventCounts.join(', ')}
        FROM engagement e
        WHERE e.type IN (${Object.keys(EVENT_INDEX).map((t) => `'${t}'`).join(', ')})
        GROUP BY 1, 2, 3
      ) parts GROUP BY 1, 2, 3
    )
    SELECT api_key_id, src.type AS source_type, src.id AS source_id, 'L' AS timing, 'L' AS resolution, 0 AS timeslice, ${names.join(', ')}
    FROM by_message_time CROSS JOIN LATERAL (VALUES ('A', 0::bigint, true), ('C', campaign_id, campaign_id <> 0), ('S', sender_id, sender_id <> 0), ('L', list_id, list_id <> 0)) src(type, id, used)
    WHERE src.used
    UNION ALL
    SELECT api_key_id, src.type, src.id, 'M', r.code, ${sliceSql('slice', 'r.seconds')}, ${names.join(', ')}
    FROM by_message_time ${sources(true)} CROSS JOIN ${RESOLUTIONS_SQL} r(code, seconds)
    WHERE src.used AND slice IS NOT NULL
    UNION ALL
    SELECT api_key_id, src.type, src.id, 'E', r.code, ${sliceSql('slice', 'r.seconds')}, ${names.join(', ')}
    FROM by_event_time ${sources(false)} CROSS JOIN ${RESOLUTIONS_SQL} r(code, seconds)
    WHERE src.used`;
}
