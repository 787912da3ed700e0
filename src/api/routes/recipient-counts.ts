import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { wireInt } from '../conventions/json.js';
import { bool, timestamp } from '../conventions/params.js';

/**
 * What contactstatistics and listrecipientstatistics share: distinct-message counts per
 * recipient (projections/kit/distinct.ts), the boolean filters on them, and the
 * LastActivityAt filters.
 */

/** Wire count field → read-model column (Mailjet's spelling: `Hardbounced`, `Softbounced`). */
const RECIPIENT_COUNTS = {
  BlockedCount: 'blocked',
  BouncedCount: 'bounced',
  ClickedCount: 'clicked',
  DeferredCount: 'deferred',
  DeliveredCount: 'delivered',
  HardbouncedCount: 'hard_bounced',
  OpenedCount: 'opened',
  ProcessedCount: 'processed',
  QueuedCount: 'queued',
  SoftbouncedCount: 'soft_bounced',
  SpamComplaintCount: 'spam',
  UnsubscribedCount: 'unsub',
} as const;
export type CountField = keyof typeof RECIPIENT_COUNTS;

/** Boolean filter → column: true = recipients with at least one such message, false = none. */
const COUNT_FILTERS = {
  Blocked: 'blocked',
  Bounced: 'bounced',
  Click: 'clicked',
  Deferred: 'deferred',
  HardBounced: 'hard_bounced',
  Open: 'opened',
  Queued: 'queued',
  Sent: 'delivered',
  SoftBounced: 'soft_bounced',
  Spam: 'spam',
  Unsubscribed: 'unsub',
} as const;
type CountFilter = keyof typeof COUNT_FILTERS;

const flag = (what: string) => bool().optional().meta({ description: `true: recipients with ${what}; false: recipients with none` });

/** The parameters (names match without regard to case, so `Hardbounced` is `HardBounced`). */
export const RECIPIENT_FILTERS = {
  Blocked: flag('a blocked message'),
  Bounced: flag('a bounced message'),
  Click: flag('a clicked message'),
  Deferred: flag('a deferred message'),
  HardBounced: flag('a hard-bounced message'),
  Open: flag('an opened message'),
  Queued: flag('a queued message'),
  Sent: flag('a delivered message'),
  SoftBounced: flag('a soft-bounced message'),
  Spam: flag('a spam complaint'),
  Unsubscribed: flag('an unsubscribe'),
  LastActivityAt: timestamp('at').optional().meta({ description: 'Last activity at exactly this second' }),
  MinLastActivityAt: timestamp('after').optional().meta({ description: 'Last activity after this (greater than)' }),
  MaxLastActivityAt: timestamp('before').optional().meta({ description: 'Last activity before this (less than)' }),
} as const;

export type RecipientFilterValues = { [K in CountFilter]?: boolean | undefined } & {
  LastActivityAt?: number | undefined;
  MinLastActivityAt?: number | undefined;
  MaxLastActivityAt?: number | undefined;
};

/**
 * The conditions of the filters given: `indexed`, those on the last activity, which its index
 * answers; `unindexed`, the count flags, which no index has (the routes' id order depends on
 * which are given: see idOrder).
 */
export function recipientConditions(q: RecipientFilterValues): { indexed: RawBuilder<unknown>[]; unindexed: RawBuilder<unknown>[] } {
  const unindexed: RawBuilder<unknown>[] = [];
  for (const [param, column] of Object.entries(COUNT_FILTERS) as [CountFilter, string][]) {
    const v = q[param];
    if (v !== undefined) unindexed.push(v ? sql`${sql.ref(column)} > 0` : sql`${sql.ref(column)} = 0`);
  }
  const indexed: RawBuilder<unknown>[] = [];
  if (q.LastActivityAt !== undefined) indexed.push(sql`last_activity_at = ${q.LastActivityAt}::int8`);
  if (q.MinLastActivityAt !== undefined) indexed.push(sql`last_activity_at > ${q.MinLastActivityAt}::int8`);
  if (q.MaxLastActivityAt !== undefined) indexed.push(sql`last_activity_at < ${q.MaxLastActivityAt}::int8`);
  return { indexed, unindexed };
}

/** The counts as wire fields. */
export function countsToWire(row: Readonly<Record<string, unknown>>): Record<CountField, number> {
  const out = {} as Record<CountField, number>;
  for (const [wire, column] of Object.entries(RECIPIENT_COUNTS) as [CountField, string][]) out[wire] = wireInt(row[column] as bigint | null);
  return out;
}

/** A count not tracked (always 0), sortable as the others are: every row ties, the tie-break orders them. */
export const UNTRACKED_COUNT = sql`CAST(0 AS int)`;

/** Sort on every count, by its wire name. */
export const COUNT_SORTABLE: Readonly<Record<string, RawBuilder<unknown>>> = Object.fromEntries(Object.entries(RECIPIENT_COUNTS).map(([wire, column]) => [wire, sql.ref(column)]));

export const countRecordFields = (): Record<CountField, z.ZodNumber> =>
  Object.fromEntries(Object.keys(RECIPIENT_COUNTS).map((k) => [k, z.number().int()])) as Record<CountField, z.ZodNumber>;
