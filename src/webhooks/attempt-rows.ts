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
  /** A Version 2 batch's event positions, space-separated; null for Version 1. */
  positions: string | null;
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
    positions: d.positions !== undefined ? d.positions.join(' ') : null,
  };
}

/** Text Postgres can store: no NUL characters. */
function cleanSnippet(s: string | null): string | null {
  return s === null ? null : s.split('\u0000').join('');
}

/**
 * Many rows in one statement: the columns that hold no commas (times, ids, numbers, outcome and
 * error class; '' for null) as comma-separated text split in Postgres, the response snippets
 * (any text) as an array. Far cheaper, for both sides, than a JSON recordset. A delivery id of 0
 * (a first attempt delivered straight from the log, which never had an outbox row) gets a fresh
 * one from the outbox's sequence, so every delivery still has an id of its own.
 */
export async function insertAttempts(db: Kysely<Database>, rows: readonly AttemptRow[]): Promise<void> {
  if (rows.length === 0) return;
  const list = <K extends keyof AttemptRow>(k: K): string => rows.map((r) => r[k] ?? '').join(',');
  await sql`
    INSERT INTO webhook_attempts (attempted_at, api_key_id, url_id, delivery_id, webhook_id, attempt, event_count, outcome, status_code, latency_ms, error_class, response_snippet, positions)
    SELECT attempted_at, api_key_id, url_id, CASE WHEN delivery_id = 0 THEN nextval(pg_get_serial_sequence('webhook_deliveries', 'id')) ELSE delivery_id END,
      webhook_id, attempt, event_count, outcome, status_code, latency_ms, error_class, response_snippet, string_to_array(positions, ' ')::bigint[]
    FROM unnest(string_to_array(${list('attempted_at')}::text, ',')::timestamptz[], string_to_array(${list('api_key_id')}::text, ',')::bigint[],
      string_to_array(${list('url_id')}::text, ',')::bigint[], string_to_array(${list('delivery_id')}::text, ',')::bigint[], string_to_array(${list('webhook_id')}::text, ','),
      string_to_array(${list('attempt')}::text, ',')::int[], string_to_array(${list('event_count')}::text, ',')::int[], string_to_array(${list('outcome')}::text, ','),
      string_to_array(${list('status_code')}::text, ',', '')::int[], string_to_array(${list('latency_ms')}::text, ',')::int[], string_to_array(${list('error_class')}::text, ',', ''),
      ${rows.map((r) => r.response_snippet)}::text[], ${rows.map((r) => r.positions)}::text[])
      AS x(attempted_at, api_key_id, url_id, delivery_id, webhook_id, attempt, event_count, outcome, status_code, latency_ms, error_class, response_snippet, positions)`.execute(db);
}
