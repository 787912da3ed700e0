import { sql } from 'kysely';
import { z } from 'zod';
import { apiErrors } from '../../http/errors.js';
import { wireId, wireInt } from '../conventions/json.js';
import { listSchema } from '../conventions/paging.js';
import { int64, list, oneOf, text, timestamp } from '../conventions/params.js';
import { orderBy } from '../conventions/sort.js';
import { rfc3339 } from '../conventions/time.js';
import { readList, tenant } from '../list-query.js';
import { defineResource } from '../resource.js';

/**
 * /statcounters — key performance counters per source × timing × resolution × slice, from the
 * `statcounters` read model (projections/statcounters.ts). Mailjet's combination rules are
 * enforced with a 400 naming what is wrong.
 */

const SOURCES = { APIKey: 'A', Campaign: 'C', List: 'L', Sender: 'S' } as const;
const TIMINGS = { Message: 'M', Event: 'E' } as const;
const RESOLUTIONS = { Lifetime: 'L', Day: 'D', Hour: 'H', Highest: 'S' } as const;
type Source = keyof typeof SOURCES;
type Timing = keyof typeof TIMINGS;
type Resolution = keyof typeof RESOLUTIONS;

/** Letter → name, of one of the tables above. */
const byLetter = <T extends Record<string, string>>(names: T): { readonly [K in keyof T as T[K]]: K } =>
  Object.fromEntries(Object.entries(names).map(([name, letter]) => [letter, name])) as { readonly [K in keyof T as T[K]]: K };

/** CounterType's letters: source, timing, resolution (e.g. `CEH` = Campaign, Event, Hour). */
const TYPE_LETTERS = { source: byLetter(SOURCES), timing: byLetter(TIMINGS), resolution: byLetter(RESOLUTIONS) };

/** Wire field → read-model column, in Mailjet's field order. */
const COUNTERS = {
  EventClickDelay: 'event_click_delay',
  EventClickedCount: 'event_clicked',
  EventOpenDelay: 'event_open_delay',
  EventOpenedCount: 'event_opened',
  EventSpamCount: 'event_spam',
  EventUnsubscribedCount: 'event_unsub',
  MessageBlockedCount: 'message_blocked',
  MessageClickedCount: 'message_clicked',
  MessageDeferredCount: 'message_deferred',
  MessageHardBouncedCount: 'message_hard_bounced',
  MessageOpenedCount: 'message_opened',
  MessageQueuedCount: 'message_queued',
  MessageSentCount: 'message_sent',
  MessageSoftBouncedCount: 'message_soft_bounced',
  MessageSpamCount: 'message_spam',
  MessageUnsubscribedCount: 'message_unsub',
} as const;

const query = listSchema({
  CounterSource: oneOf(['APIKey', 'Campaign', 'List', 'Sender']).optional(),
  CounterTiming: oneOf(['Message', 'Event']).optional(),
  CounterResolution: oneOf(['Lifetime', 'Day', 'Hour', 'Highest']).optional(),
  CounterType: text(3).regex(/^[ACLSacls][EMem][LDHSldhs]$/, { message: 'must be three letters: source (A, C, L, S), timing (M, E), resolution (L, D, H, S)' }).optional(),
  SourceID: int64({ signed: true }).optional(),
  SourceIDs: list(int64({ signed: true })).optional(),
  APIKeyID: int64({ signed: true }).optional(),
  CampaignID: int64({ signed: true }).optional(),
  FromTS: timestamp('atOrAfter').optional(),
  ToTS: timestamp('before').optional(),
});

const count = () => z.number().int();
const record = z.object({
  APIKeyID: z.number().int(),
  ...Object.fromEntries(Object.keys(COUNTERS).map((k) => [k, count()])),
  EventWorkflowExitedCount: count(),
  MessageWorkFlowExitedCount: count(),
  SourceID: z.number().int(),
  Timeslice: z.string().meta({ description: 'Slice start, RFC 3339 UTC; "" for Lifetime' }),
  Total: count().meta({ description: 'Processed messages' }),
});

interface Row {
  api_key_id: bigint;
  source_id: bigint;
  timeslice: bigint;
  [column: string]: bigint;
}

const SORTABLE = {
  Timeslice: sql.ref('timeslice'),
  SourceID: sql.ref('source_id'),
  Total: sql.ref('total'),
  // Always 0 (workflows are not in the event log), but sortable like every other count (a cast:
  // a bare integer in ORDER BY would name a column by position).
  MessageWorkFlowExitedCount: sql`CAST(0 AS int)`,
  EventWorkflowExitedCount: sql`CAST(0 AS int)`,
  ...Object.fromEntries(Object.entries(COUNTERS).map(([wire, column]) => [wire, sql.ref(column)])),
};

interface Selection {
  source: Source;
  timing: Timing;
  resolution: Resolution;
  sourceIds: bigint[] | null;
  from: number | null;
  to: number | null;
}

/** `ids` names `id` and nothing else. */
const onlyId = (ids: readonly bigint[], id: bigint): boolean => ids.length === 1 && ids[0] === id;

/** The query's parameters → what to read, or a 400 saying which rule was broken. */
function selectionOf(q: z.output<typeof query>, apiKeyId: string, nowSeconds: number): Selection {
  let source: Source | undefined = q.CounterSource;
  let timing: Timing | undefined = q.CounterTiming;
  let resolution: Resolution | undefined = q.CounterResolution;
  if (q.SourceIDs !== undefined && q.SourceID !== undefined && !onlyId(q.SourceIDs, q.SourceID)) {
    throw apiErrors.badRequest(`Invalid parameter combination: SourceID=${q.SourceID} and SourceIDs=${q.SourceIDs.join(',')} name different sources; give one of them`);
  }
  let ids: bigint[] | undefined = q.SourceIDs ?? (q.SourceID !== undefined ? [q.SourceID] : undefined);
  if (q.CounterType !== undefined) {
    const [s, t, r] = q.CounterType.toUpperCase() as `${keyof typeof TYPE_LETTERS.source}${keyof typeof TYPE_LETTERS.timing}${keyof typeof TYPE_LETTERS.resolution}`;
    const said = {
      CounterSource: TYPE_LETTERS.source[s as keyof typeof TYPE_LETTERS.source],
      CounterTiming: TYPE_LETTERS.timing[t as keyof typeof TYPE_LETTERS.timing],
      CounterResolution: TYPE_LETTERS.resolution[r as keyof typeof TYPE_LETTERS.resolution],
    };
    for (const [name, given] of [['CounterSource', source], ['CounterTiming', timing], ['CounterResolution', resolution]] as const) {
      if (given !== undefined && given !== said[name]) {
        throw apiErrors.badRequest(`Invalid parameter combination: CounterType=${q.CounterType} stands for ${name}=${said[name]}; it cannot be used with ${name}=${given}`);
      }
    }
    source = said.CounterSource;
    timing = said.CounterTiming;
    resolution = said.CounterResolution;
  }
  // The shortcuts stand for a source and its id: CampaignID=7 is CounterSource=Campaign&SourceID=7.
  for (const [shortcut, value, implied] of [
    ['CampaignID', q.CampaignID, 'Campaign'],
    ['APIKeyID', q.APIKeyID, 'APIKey'],
  ] as const) {
    if (value === undefined) continue;
    source ??= implied;
    if (source !== implied) {
      throw apiErrors.badRequest(`Invalid parameter combination: ${shortcut} stands for CounterSource=${implied}&SourceID=${value}; it cannot be used with CounterSource=${source}`);
    }
    if (ids !== undefined && !onlyId(ids, value)) {
      throw apiErrors.badRequest(`Invalid parameter combination: ${shortcut} stands for CounterSource=${implied}&SourceID=${value}; it cannot be used with SourceID=${ids.join(',')}`);
    }
    ids = [value];
  }
  const missing = [source === undefined && 'CounterSource', timing === undefined && 'CounterTiming', resolution === undefined && 'CounterResolution'].filter(Boolean);
  if (source === undefined || timing === undefined || resolution === undefined) {
    throw apiErrors.badRequest(`Missing parameter ${missing.join(', ')}: statcounters needs CounterSource, CounterTiming and CounterResolution (or CounterType)`);
  }
  if (source === 'List' && (timing !== 'Message' || resolution !== 'Lifetime')) {
    throw apiErrors.badRequest('Invalid parameter combination: CounterSource=List is only available with CounterTiming=Message and CounterResolution=Lifetime');
  }
  if (source === 'Sender' && timing !== 'Message') {
    throw apiErrors.badRequest('Invalid parameter combination: CounterSource=Sender is only available with CounterTiming=Message');
  }
  if (source !== 'APIKey' && ids === undefined) {
    throw apiErrors.badRequest(`Missing parameter SourceID: CounterSource=${source} needs the ${source.toLowerCase()} id in SourceID`);
  }
  if (resolution === 'Lifetime') {
    if (q.FromTS !== undefined || q.ToTS !== undefined) {
      throw apiErrors.badRequest('Invalid parameter FromTS/ToTS: time ranges cannot be used with CounterResolution=Lifetime');
    }
  } else if (q.FromTS === undefined) {
    throw apiErrors.badRequest(`Missing parameter FromTS: CounterResolution=${resolution} needs a FromTS (and optionally ToTS, default now)`);
  }
  const to = resolution === 'Lifetime' ? null : (q.ToTS ?? nowSeconds);
  const from = q.FromTS ?? null;
  if (from !== null && to !== null && to <= from) throw apiErrors.badRequest('Invalid parameter ToTS: must be later than FromTS');
  // APIKey counters are stored under source 0: asking for another key's id finds nothing.
  const sourceIds = source === 'APIKey' ? (ids === undefined || ids.some((id) => id === 0n || id.toString() === apiKeyId) ? [0n] : []) : ids!;
  return { source, timing, resolution, sourceIds, from, to };
}

export const statcountersResource = defineResource({
  name: 'statcounters',
  unsupported: { IdentityID: 'undocumented; counters are not kept per sending identity' },
  description: 'Key performance counters per source (APIKey, Campaign, List, Sender), timing (Message, Event) and resolution (Lifetime, Day, Hour, Highest = 5 minutes).',
  query,
  record,
  async list({ db, principal, query: q, page }) {
    const s = selectionOf(q, principal.apiKeyId, Math.floor(Date.now() / 1000));
    if (s.sourceIds !== null && s.sourceIds.length === 0) return { rows: [], total: 0 };
    const resolution = RESOLUTIONS[s.resolution];
    const where = [
      tenant(principal.apiKeyId),
      sql`source_type = ${SOURCES[s.source]}`,
      sql`timing = ${resolution === 'L' ? 'L' : TIMINGS[s.timing]}`,
      sql`resolution = ${resolution}`,
    ];
    if (s.sourceIds !== null) {
      where.push(s.sourceIds.length === 1 ? sql`source_id = ${(s.sourceIds[0] as bigint).toString()}::int8` : sql`source_id = ANY(${s.sourceIds.map(String)}::int8[])`);
    }
    // Slices in [FromTS, ToTS): those whose start (Timeslice) is in it (projections/README.md,
    // the numbers), so a slice that began before FromTS, and holds counts from before it, is not
    // listed.
    if (s.from !== null) where.push(sql`timeslice >= ${s.from}::int8`);
    if (s.to !== null) where.push(sql`timeslice < ${s.to}::int8`);
    const { rows, total } = await readList<Row>(
      db,
      { from: sql`statcounters`, columns: sql`*`, where, orderBy: orderBy('statcounters', q.Sort, SORTABLE, [sql`timeslice`, sql`source_id`]) },
      page,
    );
    return { rows: rows.map((r) => toWire(r, resolution === 'L')), total };
  },
});

/** Wire fields in Mailjet's (alphabetical) order, each read from the row. */
const FIELDS: readonly (readonly [string, (r: Row, lifetime: boolean) => unknown])[] = [
  ['APIKeyID', (r) => wireId(r.api_key_id)],
  ...Object.entries({ ...COUNTERS, EventWorkflowExitedCount: null, MessageWorkFlowExitedCount: null, SourceID: null, Timeslice: null, Total: 'total' })
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([wire, column]): readonly [string, (r: Row, lifetime: boolean) => unknown] => {
      if (wire === 'SourceID') return [wire, (r) => wireId(r.source_id)];
      if (wire === 'Timeslice') return [wire, (r, lifetime) => (lifetime ? '' : rfc3339(r.timeslice))];
      if (column === null) return [wire, () => 0]; // workflows: not tracked
      return [wire, (r) => wireInt(r[column])];
    }),
];

function toWire(r: Row, lifetime: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [wire, read] of FIELDS) out[wire] = read(r, lifetime);
  return out;
}
