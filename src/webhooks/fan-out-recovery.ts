import { sql } from 'kysely';
import type { Db } from '../db/connect.js';
import { advanceCheckpoint, readCheckpoint } from '../log/checkpoints.js';
import type { Logger } from '../logger.js';
import { type EnqueueResult, enqueueEvents, isWebhookType, readLogAfter } from './enqueue.js';
import type { FanOutOptions } from './fan-out.js';
import { CheckpointMoved, WEBHOOKS_CHECKPOINT } from './fan-out-checkpoint.js';
import { FIRST_ATTEMPTS_CHECKPOINT, type FirstAttemptLedger } from './first-attempts-ledger.js';
import { OUTBOX_CHANNEL, directPositions } from './outbox.js';
import { type FirstAttempts, Reservations } from './reservations.js';
import { BATCH_ID_PREFIX, MESSAGE_ID_PREFIX } from './webhook-ids.js';

/**
 * After a crash or a takeover: the events between the low-water checkpoint and the fan-out's
 * whose Version 1 first attempt went straight from the log and has no outcome recorded (no
 * attempt, no outbox row), and is not open in this process, are enqueued again (sent straight
 * from the log where there is room, else as outbox rows). Their Version 2 batches were
 * committed with the checkpoint's move and are not touched. An event whose route may have
 * changed since it was fanned out (a URL of its tenant and type changed version, status, type or
 * backup flag after the event entered the log: switched to Version 2, say, or dead with a
 * Version 2 backup) may have been sent straight from the log all the same: it is enqueued again
 * to its route as it is now, whatever its version, unless an outbox row or an attempt holds it
 * (a Version 2 batch's attempt rows name its events). Returns how many deliveries it enqueued.
 */
export async function recoverFirstAttempts(
  db: Db,
  options: FanOutOptions,
  ledger: FirstAttemptLedger,
  firstAttempts: FirstAttempts | null,
  onEnqueued: (dueInMs: number) => void,
  log: Logger,
  high: bigint,
): Promise<number> {
  let after = await readCheckpoint(db.kysely, FIRST_ATTEMPTS_CHECKPOINT);
  const from = after;
  if (after >= high) return 0;
  // What this process has open now, taken before the query: an attempt whose outcome commits
  // after the query leaves the ledger, but is in this snapshot (else it would be sent again).
  const openBefore = ledger.snapshot();
  const handled = await handledFirstAttempts(db, after, high);
  const changed = await routeChangedSince(db, after, high);
  let recovered = 0;
  while (after < high) {
    const rows = (await readLogAfter(db.kysely, after, options.batchSize)).filter((r) => BigInt(r.position) <= high);
    const last = rows.at(-1);
    if (last === undefined) break;
    after = BigInt(last.position);
    const todo = rows.filter((r) => {
      const p = BigInt(r.position);
      return r.payload !== null && isWebhookType(r.type) && !openBefore.has(p) && !ledger.has(p) && !handled.has(p);
    });
    if (todo.length === 0) continue;
    const reservations = firstAttempts !== null ? new Reservations(firstAttempts) : null;
    let result: EnqueueResult;
    try {
      result = await db.kysely.transaction().execute(async (trx) => {
        const r = await enqueueEvents(trx, todo, options.grouping, new Map(), Date.now(), reservations, { versionOneOnly: { except: changed } });
        await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(trx);
        // Still the holder: the fan-out checkpoint is where this process found it.
        if (!(await advanceCheckpoint(trx, WEBHOOKS_CHECKPOINT, high, high))) throw new CheckpointMoved();
        return r;
      });
    } catch (err) {
      reservations?.failed();
      throw err;
    }
    ledger.add(directPositions(result.claimed));
    reservations?.committed(result.claimed);
    if (result.deliveries > result.claimed.length) onEnqueued(0);
    recovered += result.deliveries;
  }
  if (recovered > 0) log.warn({ from: String(from), to: String(high), recovered }, 'webhook first attempts left without an outcome were enqueued again');
  return recovered;
}

/**
 * The positions in (`low`, `high`] that a Version 2 batch holds (in the outbox, or named by its
 * attempt rows once delivered), or whose Version 1 delivery (`msg_<position>`) has an outbox row
 * or an attempt recorded: one pass over the outbox and one over the attempts made since five
 * minutes before the first of those events entered the log (the block range index on attempt
 * times keeps that to recent rows), whatever the range's size.
 */
async function handledFirstAttempts(db: Db, low: bigint, high: bigint): Promise<Set<bigint>> {
  const single = sql.lit(MESSAGE_ID_PREFIX);
  const batch = sql.lit(BATCH_ID_PREFIX);
  const position = sql.raw(`substr(webhook_id, ${MESSAGE_ID_PREFIX.length + 1})::bigint`);
  const { rows } = await sql<{ position: string }>`
    WITH since AS (
      SELECT coalesce((SELECT recorded_at FROM events WHERE position > ${low} ORDER BY position LIMIT 1), now()) - interval '5 minutes' AS at
    ),
    handled AS (
      SELECT ${position} AS position FROM webhook_deliveries WHERE starts_with(webhook_id, ${single})
      UNION
      SELECT unnest(positions) FROM webhook_deliveries WHERE starts_with(webhook_id, ${batch})
      UNION
      SELECT ${position} FROM webhook_attempts, since WHERE attempted_at >= since.at AND starts_with(webhook_id, ${single})
      UNION
      SELECT unnest(positions) FROM webhook_attempts, since WHERE attempted_at >= since.at AND starts_with(webhook_id, ${batch})
    )
    SELECT position::text AS position FROM handled WHERE position > ${low} AND position <= ${high}`.execute(db.kysely);
  return new Set(rows.map((r) => BigInt(r.position)));
}

/**
 * The positions in (`low`, `high`] whose tenant has a callback URL for their type whose version,
 * status, type or backup flag changed (`route_changed_at`, migration 0009) after the event
 * entered the log, or within a second before (the change's transaction may have committed after
 * the fan-out read the event). Where such an event went at the fan-out is not known.
 */
async function routeChangedSince(db: Db, low: bigint, high: bigint): Promise<Set<bigint>> {
  const { rows } = await sql<{ position: string }>`
    SELECT e.position::text AS position FROM events e
    WHERE e.position > ${low} AND e.position <= ${high}
      AND EXISTS (SELECT 1 FROM callback_urls u WHERE u.api_key_id = e.api_key_id AND u.event_type = e.type AND u.route_changed_at > e.recorded_at - interval '1 second')`.execute(db.kysely);
  return new Set(rows.map((r) => BigInt(r.position)));
}
