import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import { type NewDelivery, OUTBOX_CHANNEL, insertDeliveries } from './outbox.js';
import { isBatchWebhookId, messageWebhookId } from './webhook-ids.js';
import { type AttemptRow, insertAttempts } from './attempt-rows.js';

/**
 * What happens to the pending deliveries of a URL that died: while its primary is dead, a
 * tenant's events go to the alive backup (the same rows, starting afresh on the first-attempt
 * lane, split into single events if the backup is Version 1); with no backup to take them they
 * are dropped and an attempt row says why. Rows in flight elsewhere are left to their worker,
 * which sends them back here when it finds the URL dead.
 */

export interface RerouteResult {
  moved: number;
  dropped: number;
  droppedEvents: number;
}

const CHUNK = 500;

interface PendingRow {
  id: bigint;
  api_key_id: bigint;
  url_id: bigint;
  webhook_id: string;
  events: string[];
  positions: string[];
  attempts: number;
}

export async function rerouteDeadUrl(db: Kysely<Database>, urlId: bigint): Promise<RerouteResult> {
  const total: RerouteResult = { moved: 0, dropped: 0, droppedEvents: 0 };
  for (;;) {
    const step = await db.transaction().execute(async (trx) => {
      const url = await trx.selectFrom('callback_urls').select(['api_key_id', 'event_type', 'is_backup', 'status']).where('id', '=', urlId).executeTakeFirst();
      if (url === undefined || url.status !== 'dead') return null;
      const rows = (
        await sql<PendingRow>`
          SELECT id, api_key_id, url_id, webhook_id, events, positions::text[] AS positions, attempts FROM webhook_deliveries
          WHERE retry = ANY(ARRAY[false, true]) AND url_id = ${urlId} AND (claimed_until IS NULL OR claimed_until < now())
          ORDER BY id LIMIT ${CHUNK} FOR UPDATE SKIP LOCKED`.execute(trx)
      ).rows;
      if (rows.length === 0) return null;
      const backup = url.is_backup
        ? undefined
        : await trx
            .selectFrom('callback_urls')
            .select(['id', 'version'])
            .where('api_key_id', '=', url.api_key_id)
            .where('event_type', '=', url.event_type)
            .where('is_backup', '=', true)
            .where('status', '=', 'alive')
            .executeTakeFirst();
      if (backup !== undefined) {
        // A Version 1 backup takes Version 1 deliveries as they are; a batch, even of one event,
        // becomes one `msg_<position>` delivery per event, the id Version 1 receivers dedupe by.
        const split: typeof rows = [];
        const whole: typeof rows = [];
        for (const r of rows) (backup.version !== 2 && isVersion2Batch(r.webhook_id, r.events.length) ? split : whole).push(r);
        if (whole.length > 0) {
          await sql`UPDATE webhook_deliveries SET url_id = ${backup.id}, retry = false, attempts = 0, first_failed_at = NULL, claim = NULL, claimed_until = NULL, due_at = now()
            WHERE id = ANY(${whole.map((r) => String(r.id))}::bigint[])`.execute(trx);
        }
        await replaceWithSingles(trx, split, backup.id);
        await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(trx);
        return { moved: rows.length, dropped: 0, droppedEvents: 0 };
      }
      await trx.deleteFrom('webhook_deliveries').where('id', 'in', rows.map((r) => r.id)).execute();
      const now = new Date().toISOString();
      await insertAttempts(trx, rows.map((r): AttemptRow => ({
        attempted_at: now,
        api_key_id: String(r.api_key_id),
        url_id: String(r.url_id),
        delivery_id: String(r.id),
        webhook_id: r.webhook_id,
        attempt: r.attempts,
        event_count: r.events.length,
        outcome: 'dropped',
        status_code: null,
        latency_ms: 0,
        error_class: 'url_dead',
        response_snippet: null,
        positions: isBatchWebhookId(r.webhook_id) ? r.positions.join(' ') : null,
      })));
      return { moved: 0, dropped: rows.length, droppedEvents: rows.reduce((n, r) => n + r.events.length, 0) };
    });
    if (step === null) return total;
    total.moved += step.moved;
    total.dropped += step.dropped;
    total.droppedEvents += step.droppedEvents;
  }
}

/** A Version 2 batch (`bat_…`), whatever its number of events, or a row of several events: a Version 1 URL gets its events one by one (`splitForVersion1`). */
export const isVersion2Batch = (webhookId: string, eventCount: number): boolean => eventCount !== 1 || isBatchWebhookId(webhookId);

/**
 * A claimed Version 2 batch for a Version 1 URL (its Version changed while the row waited):
 * replaced by one row per event (`msg_<position>`), due now. False if the claim was lost meanwhile.
 */
export async function splitForVersion1(db: Kysely<Database>, row: { id: bigint; claim: string; urlId: bigint }): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const found = (
      await sql<PendingRow>`
        DELETE FROM webhook_deliveries WHERE id = ${row.id} AND claim = ${row.claim}
        RETURNING id, api_key_id, url_id, webhook_id, events, positions::text[] AS positions, attempts`.execute(trx)
    ).rows;
    await replaceWithSingles(trx, found, row.urlId, false);
    return found.length > 0;
  });
}

async function replaceWithSingles(trx: Kysely<Database>, rows: readonly PendingRow[], urlId: bigint, deleteFirst = true): Promise<void> {
  if (rows.length === 0) return;
  if (deleteFirst) await trx.deleteFrom('webhook_deliveries').where('id', 'in', rows.map((r) => r.id)).execute();
  const singles: NewDelivery[] = rows.flatMap((r) =>
    r.events.map((json, i) => {
      const position = BigInt(r.positions[i] ?? '0');
      return { apiKeyId: BigInt(r.api_key_id), urlId, webhookId: messageWebhookId(position), events: [json], positions: [position], bytes: Buffer.byteLength(json), delayMs: 0 };
    }),
  );
  await insertDeliveries(trx, singles);
}
