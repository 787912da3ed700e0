import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import { INT64_MAX, WEBHOOK_EVENT_TYPES } from '../events/schema.js';
import { readCheckpoint } from '../log/checkpoints.js';
import { type Checked, type WebhookEventType, checkEventType } from './callback-url-input.js';
import { type GroupingLimits, LOG_SELECT, type LogEventForWebhooks, enqueueEvents } from './enqueue.js';
import { WEBHOOKS_CHECKPOINT } from './fan-out-checkpoint.js';
import { OUTBOX_CHANNEL } from './outbox.js';
import { parseTime } from './webhook-attempts.js';

/**
 * Sends a tenant's past events again (POST /v1/webhooks/replay): the events in a position
 * range and/or a time range (when mailtally recorded them), optionally of some types, are
 * enqueued to the tenant's URLs as they are now (alive primary, else alive backup). Version 1
 * deliveries keep their webhook-id (`msg_<position>`), so a receiver that dedupes ignores what
 * it already has; Version 2 events are grouped into new batches. Only events the fan-out has
 * passed (its checkpoint) are sent again: those after it are still on their way for the first
 * time, and replaying them too would send them twice (as new Version 2 batches, which a receiver
 * cannot dedupe). At most `maxEvents` per call:
 * `nextPosition` says where to continue — also when a batch failed (a statement timeout, a lost
 * connection) after others were enqueued.
 */

export interface ReplayRange {
  /** Events after this position… */
  fromPosition?: bigint;
  /** …up to and including this one. */
  toPosition?: bigint;
  /** Recorded in [fromTime, toTime). */
  fromTime?: Date;
  toTime?: Date;
  eventTypes?: WebhookEventType[];
}

export interface ReplayResult {
  events: number;
  deliveries: number;
  /** Set when the range holds more than was replayed: call again with FromPosition = this. */
  nextPosition: bigint | null;
  /** Why the call stopped before its bound, when a batch failed after others were enqueued. */
  interruptedBy?: unknown;
}

const READ_BATCH = 1000;

/** Events one replay call sends at most, by default (NextPosition says where to go on). */
export const MAX_REPLAY_EVENTS = 100_000;

export async function replayWebhookEvents(
  db: Kysely<Database>,
  apiKeyId: bigint | string,
  range: ReplayRange,
  grouping: GroupingLimits,
  maxEvents = MAX_REPLAY_EVENTS,
): Promise<ReplayResult> {
  const tenant = BigInt(apiKeyId);
  const types = range.eventTypes ?? [...WEBHOOK_EVENT_TYPES];
  const fannedOut = await readCheckpoint(db, WEBHOOKS_CHECKPOINT);
  const upTo = range.toPosition !== undefined && range.toPosition < fannedOut ? range.toPosition : fannedOut;
  let cursor = range.fromPosition ?? 0n;
  const result: ReplayResult = { events: 0, deliveries: 0, nextPosition: null };
  let seen = 0;
  for (;;) {
    const limit = Math.min(READ_BATCH, maxEvents - seen);
    if (limit <= 0) {
      result.nextPosition = cursor;
      return result;
    }
    let rows: LogEventForWebhooks[];
    let r: Awaited<ReturnType<typeof enqueueEvents>>;
    try {
      ({ rows } = await sql<LogEventForWebhooks>`
        SELECT ${LOG_SELECT} FROM events e
        WHERE e.api_key_id = ${tenant} AND e.position > ${cursor} AND e.type = ANY(${types}::text[])
          AND e.position <= ${upTo}
          ${range.fromTime !== undefined ? sql`AND e.recorded_at >= ${range.fromTime}` : sql``}
          ${range.toTime !== undefined ? sql`AND e.recorded_at < ${range.toTime}` : sql``}
        ORDER BY e.position LIMIT ${limit}`.execute(db));
      if (rows.length === 0) return result;
      r = await db.transaction().execute(async (trx) => {
        const out = await enqueueEvents(trx, rows, grouping, new Map());
        if (out.deliveries > 0) await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(trx);
        return out;
      });
    } catch (err) {
      // The batches before this one are enqueued for good: the caller is told where to go on
      // from (the failed batch's own transaction left nothing), not given an error whose retry
      // would enqueue them a second time. With nothing done yet, the error is the answer.
      if (seen === 0) throw err;
      result.nextPosition = cursor;
      result.interruptedBy = err;
      return result;
    }
    const last = rows.at(-1) as LogEventForWebhooks;
    result.events += r.events;
    result.deliveries += r.deliveries;
    seen += rows.length;
    cursor = BigInt(last.position);
    if (rows.length < limit) return result;
  }
}

/**
 * A replay request body, names matched without regard to case: `FromPosition`, `ToPosition`,
 * `FromTS`, `ToTS` (Unix seconds or RFC 3339) and `EventType` (a name or number, or a list).
 * At least a starting point — `FromPosition` or `FromTS` — is required.
 */
export function parseReplayRequest(body: unknown): Checked<ReplayRange> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { ok: false, message: 'The request body must be a JSON object, e.g. {"FromTS":"2024-05-01T00:00:00Z"}' };
  }
  const range: ReplayRange = {};
  const problems: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    const lower = key.toLowerCase();
    if (lower === 'fromposition' || lower === 'toposition') {
      const text = typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string' ? String(value).trim() : '';
      if (!/^\d{1,19}$/.test(text) || BigInt(text) > INT64_MAX) problems.push(`${key} must be a log position (a whole number up to ${INT64_MAX}), got ${JSON.stringify(String(value))}`);
      else if (lower === 'fromposition') range.fromPosition = BigInt(text);
      else range.toPosition = BigInt(text);
    } else if (lower === 'fromts' || lower === 'tots') {
      const at = typeof value === 'number' || typeof value === 'string' ? parseTime(String(value).trim()) : null;
      if (at === null) problems.push(`${key} must be Unix seconds or an RFC 3339 time, got ${JSON.stringify(String(value))}`);
      else if (lower === 'fromts') range.fromTime = at;
      else range.toTime = at;
    } else if (lower === 'eventtype' || lower === 'eventtypes') {
      const list = Array.isArray(value) ? value : String(value).split(',');
      const types: WebhookEventType[] = [];
      for (const v of list) {
        const c = checkEventType(typeof v === 'string' ? v.trim() : v);
        if (c.ok) types.push(c.value);
        else problems.push(c.message);
      }
      if (list.length === 0) problems.push(`${key} must name at least one event type`);
      range.eventTypes = [...new Set(types)];
    } else {
      problems.push(`Unknown property "${key}"; a replay takes FromPosition, ToPosition, FromTS, ToTS and EventType`);
    }
  }
  if (problems.length === 0 && range.fromPosition === undefined && range.fromTime === undefined) {
    problems.push('Give where to start: FromPosition (a log position) or FromTS (a time)');
  }
  // A range that holds nothing is a mistake in the request, not an empty replay.
  if (range.fromPosition !== undefined && range.toPosition !== undefined && range.toPosition <= range.fromPosition) {
    problems.push(`ToPosition must be after FromPosition (the events after FromPosition, up to and including ToPosition), got ${range.fromPosition} and ${range.toPosition}`);
  }
  if (range.fromTime !== undefined && range.toTime !== undefined && range.toTime <= range.fromTime) {
    problems.push(`ToTS must be later than FromTS (the range is [FromTS, ToTS))`);
  }
  return problems.length > 0 ? { ok: false, message: problems.join('; ') } : { ok: true, value: range };
}
