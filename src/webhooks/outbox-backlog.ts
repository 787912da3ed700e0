import { type Kysely, sql } from 'kysely';
import { cappedCount } from '../db/capped-count.js';
import type { Database } from '../db/schema.js';

/**
 * What waits in the delivery outbox, for /metrics: rows (first attempts spilled from a full lane,
 * Version 2 batches in their window, retries waiting for their due time) and how long the oldest
 * has waited; and the callback URLs alive and dead. Read by whichever process runs the
 * dispatcher, over every tenant: the outbox is shared.
 */

/** Up to this many outbox rows are counted exactly; past it, Postgres's estimate of the table's rows. */
export const EXACT_OUTBOX_COUNT = 100_000;

export interface OutboxBacklog {
  /** Deliveries waiting (requests to make: a Version 2 row carries several events). */
  readonly deliveries: number;
  /** False when `deliveries` is past EXACT_OUTBOX_COUNT and is the planner's estimate. */
  readonly exact: boolean;
  /** Seconds since the oldest waiting delivery was enqueued; 0 when none waits. */
  readonly oldestSeconds: number;
  /** Callback URLs by status. */
  readonly urls: { readonly alive: number; readonly dead: number };
}

/**
 * Three cheap reads: a count that scans at most EXACT_OUTBOX_COUNT + 1 rows (an endpoint down
 * for a day can leave millions), the oldest row by its identity key, and the URLs by status.
 */
export async function readOutboxBacklog(db: Kysely<Database>): Promise<OutboxBacklog> {
  const [counted, oldest, urls] = await Promise.all([
    cappedCount(db, 'webhook_deliveries', EXACT_OUTBOX_COUNT),
    sql<{ s: number | null }>`SELECT extract(epoch FROM now() - created_at)::float8 AS s FROM webhook_deliveries ORDER BY id LIMIT 1`.execute(db),
    sql<{ status: string; n: string }>`SELECT status, count(*) AS n FROM callback_urls GROUP BY status`.execute(db),
  ]);
  const byStatus = new Map(urls.rows.map((r) => [r.status, Number(r.n)]));
  return {
    deliveries: counted.count,
    exact: counted.exact,
    oldestSeconds: Math.max(0, oldest.rows[0]?.s ?? 0),
    urls: { alive: byStatus.get('alive') ?? 0, dead: byStatus.get('dead') ?? 0 },
  };
}

/**
 * How many deliveries of one key wait in the outbox, counted up to `upTo`. A delivery waits for
 * one of its key's own callback URLs (a URL's rows go with it), so the count walks those URLs'
 * rows through the outbox's (retry, url_id, due_at) index, one URL at a time (the inner LIMIT
 * keeps the planner from joining the whole index instead): at most `upTo` rows read, however
 * many other keys have waiting (2M rows of another key: 0.2 ms, against 390 ms by `api_key_id`).
 */
export async function waitingForKey(db: Kysely<Database>, apiKeyId: string, upTo: number): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM (
      SELECT 1 FROM callback_urls u
      CROSS JOIN LATERAL (SELECT 1 FROM webhook_deliveries d WHERE d.retry = ANY(ARRAY[false, true]) AND d.url_id = u.id LIMIT ${upTo}) AS w
      WHERE u.api_key_id = ${apiKeyId}::int8
      LIMIT ${upTo}) AS d`.execute(db);
  return Number(rows[0]?.n ?? 0);
}
