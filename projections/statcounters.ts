import { API_KEY, bigints, col } from './kit/columns.js';
import { delayOf, type MessageFacts, messageFacts, OUTCOMES, type Outcome } from './kit/message-facts.js';
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
const TOTAL = 0;
/** Distinct-message flags → their sum column. */
const FLAG_INDEX: Partial<Record<Outcome, number>> = {
  sent: 1,
  queued: 2,
  deferred: 3,
  blocked: 4,
  hardBounced: 5,
  softBounced: 6,
  opened: 7,
  clicked: 8,
  spam: 9,
  unsub: 10,
};
const EVENT_INDEX: Partial<Record<LogEvent['type'], number>> = { open: 11, click: 12, spam: 13, unsub: 14 };
const OPEN_DELAY = 15;
const CLICK_DELAY = 16;

export const statcounters: Projection = {
  name: 'statcounters',
  version: 1,
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
