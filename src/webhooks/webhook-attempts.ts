import type { Kysely } from 'kysely';
import type { AttemptOutcome, Database, WebhookAttemptRow } from '../db/schema.js';
import type { Checked } from './callback-url-input.js';
import { parseId } from './callback-url-store.js';
import { parseInstant } from '../api/conventions/time.js';

/**
 * A tenant's delivery attempts (GET /v1/webhooks/attempts), newest first: every HTTP attempt
 * with its status, latency, error class and the start of the answer, plus deliveries that
 * expired or were dropped because their URL died.
 */

export interface AttemptFilters {
  urlId?: bigint;
  outcome?: AttemptOutcome;
  webhookId?: string;
  /** attempted_at in [from, to) */
  from?: Date;
  to?: Date;
}

export type AttemptWire = {
  ID: bigint;
  AttemptedAt: string;
  CallbackUrlID: bigint;
  DeliveryID: bigint;
  WebhookID: string;
  Attempt: number;
  EventCount: number;
  Outcome: AttemptOutcome;
  StatusCode: number | null;
  LatencyMs: number;
  ErrorClass: string | null;
  ResponseSnippet: string | null;
};

const OUTCOMES: readonly AttemptOutcome[] = ['delivered', 'failed', 'expired', 'dropped'];

export async function listWebhookAttempts(
  db: Kysely<Database>,
  apiKeyId: bigint | string,
  f: AttemptFilters,
  page: { limit: number; offset: number },
): Promise<{ rows: WebhookAttemptRow[]; total: number }> {
  let q = db.selectFrom('webhook_attempts').where('api_key_id', '=', BigInt(apiKeyId));
  if (f.urlId !== undefined) q = q.where('url_id', '=', f.urlId);
  if (f.outcome !== undefined) q = q.where('outcome', '=', f.outcome);
  if (f.webhookId !== undefined) q = q.where('webhook_id', '=', f.webhookId);
  if (f.from !== undefined) q = q.where('attempted_at', '>=', f.from);
  if (f.to !== undefined) q = q.where('attempted_at', '<', f.to);
  const [rows, count] = await Promise.all([
    q.selectAll().orderBy('id', 'desc').limit(page.limit).offset(page.offset).execute(),
    q.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export function attemptToWire(r: WebhookAttemptRow): AttemptWire {
  return {
    ID: r.id,
    AttemptedAt: r.attempted_at.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    CallbackUrlID: r.url_id,
    DeliveryID: r.delivery_id,
    WebhookID: r.webhook_id,
    Attempt: r.attempt,
    EventCount: r.event_count,
    Outcome: r.outcome,
    StatusCode: r.status_code,
    LatencyMs: r.latency_ms,
    ErrorClass: r.error_class,
    ResponseSnippet: r.response_snippet,
  };
}

/**
 * Filters from a query string, names matched without regard to case: `CallbackUrlID` (or
 * `UrlID`), `Outcome`, `WebhookID`, `FromTS` / `ToTS` (Unix seconds or RFC 3339). Paging
 * parameters are the caller's.
 */
export function parseAttemptFilters(query: Readonly<Record<string, unknown>>): Checked<AttemptFilters> {
  const f: AttemptFilters = {};
  const problems: string[] = [];
  for (const [key, raw] of Object.entries(query)) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value === undefined || value === '') continue;
    const text = String(value).trim();
    switch (key.toLowerCase()) {
      case 'callbackurlid':
      case 'urlid': {
        const id = parseId(text);
        if (id === null) problems.push(`${key} must be a callback URL ID, got ${JSON.stringify(text)}`);
        else f.urlId = id;
        break;
      }
      case 'outcome':
        if ((OUTCOMES as readonly string[]).includes(text.toLowerCase())) f.outcome = text.toLowerCase() as AttemptOutcome;
        else problems.push(`${key} must be one of ${OUTCOMES.join(', ')}, got ${JSON.stringify(text)}`);
        break;
      case 'webhookid':
        // A text column cannot hold U+0000: the query would fail (a 500), not find nothing.
        if (text.includes('\u0000')) problems.push(`${key} must not contain a NUL character`);
        else f.webhookId = text;
        break;
      case 'fromts':
      case 'tots': {
        const at = parseTime(text);
        if (at === null) problems.push(`${key} must be Unix seconds or an RFC 3339 time, got ${JSON.stringify(text)}`);
        else if (key.toLowerCase() === 'fromts') f.from = at;
        else f.to = at;
        break;
      }
    }
  }
  // A range that holds nothing is a mistake in the request (as for a replay's), not an empty page.
  if (f.from !== undefined && f.to !== undefined && f.to <= f.from) problems.push('ToTS must be later than FromTS (the range is [FromTS, ToTS))');
  return problems.length > 0 ? { ok: false, message: problems.join('; ') } : { ok: true, value: f };
}

/** Unix seconds, RFC 3339, or an ISO date-time without zone (taken as UTC), to the millisecond. */
export function parseTime(text: string): Date | null {
  const at = parseInstant(text);
  return at === null ? null : new Date(at.seconds * 1000 + Math.floor(at.fraction * 1000));
}
