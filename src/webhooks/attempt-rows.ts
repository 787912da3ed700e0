import { type Kysely, sql } from 'kysely';
import type { AttemptOutcome, Database } from '../db/schema.js';
import type { HttpOutcome } from './http-delivery.js';
import type { ClaimedDelivery } from './outbox.js';

/** Rows of `webhook_attempts`, written many at a time. */

export interface AttemptRow {
  attempted_at: string;
  api_key_id: string;
  url_id: string;
  delivery_id: string;
  webhook_id: string;
  attempt: number;
  event_count: number;
  outcome: AttemptOutcome;
  status_code: number | null;
  latency_ms: number;
  error_class: string | null;
  response_snippet: string | null;
}

export function attemptRow(r: { delivery: ClaimedDelivery; http: HttpOutcome; attemptedAt: Date }, attempt: number, outcome: AttemptOutcome): AttemptRow {
  const d = r.delivery;
  return {
    attempted_at: r.attemptedAt.toISOString(),
    api_key_id: String(d.apiKeyId),
    url_id: String(d.urlId),
    delivery_id: String(d.id),
    webhook_id: d.webhookId,
    attempt,
    event_count: d.eventCount,
    outcome,
    status_code: r.http.statusCode,
    latency_ms: r.http.latencyMs,
    error_class: r.http.errorClass,
    response_snippet: cleanSnippet(r.http.snippet),
  };
}

/** Text Postgres can store: no NUL characters. */
export function cleanSnippet(s: string | null): string | null {
  return s === null ? null : s.split('\u0000').join('');
}

/** Many rows in one statement, as one array per column (unnest: far cheaper than a JSON recordset). */
export async function insertAttempts(db: Kysely<Database>, rows: readonly AttemptRow[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <K extends keyof AttemptRow>(k: K): AttemptRow[K][] => rows.map((r) => r[k]);
  await sql`
    INSERT INTO webhook_attempts (attempted_at, api_key_id, url_id, delivery_id, webhook_id, attempt, event_count, outcome, status_code, latency_ms, error_class, response_snippet)
    SELECT * FROM unnest(${col('attempted_at')}::timestamptz[], ${col('api_key_id')}::bigint[], ${col('url_id')}::bigint[], ${col('delivery_id')}::bigint[],
      ${col('webhook_id')}::text[], ${col('attempt')}::int[], ${col('event_count')}::int[], ${col('outcome')}::text[], ${col('status_code')}::int[],
      ${col('latency_ms')}::int[], ${col('error_class')}::text[], ${col('response_snippet')}::text[])`.execute(db);
}
