import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import type { CallbackUrlStatus, CallbackUrlVersion } from './callback-url-input.js';
import { BATCH_ID_PREFIX } from './webhook-ids.js';

/**
 * The delivery outbox (0003 migration): rows go in with the checkpoint move that produced them
 * (or a replay), come out through `claimDue`, and leave when an outcome is recorded
 * (outcome-writer.ts) or their URL dies (reroute.ts). Row sets travel as one array (or one
 * separated text) per column, unnested in Postgres.
 */

/** NOTIFY channel that wakes dispatchers when deliveries are enqueued. */
export const OUTBOX_CHANNEL = 'mailtally_webhooks';

export interface NewDelivery {
  apiKeyId: bigint;
  urlId: bigint;
  webhookId: string;
  /** Mailjet callback objects as JSON text, with their log positions. */
  events: readonly string[];
  positions: readonly bigint[];
  bytes: number;
  /** Due this long after the transaction's start (a Version 2 batch waits for its window). */
  delayMs: number;
}

export interface ClaimedDelivery {
  /** 0 for a first attempt sent straight from the log (`direct`): it has no outbox row. */
  id: bigint;
  /**
   * The event's log position when this is a Version 1 first attempt sent straight from the log
   * (first-attempts-ledger.ts); null for a row claimed from the outbox.
   */
  direct: bigint | null;
  apiKeyId: bigint;
  urlId: bigint;
  webhookId: string;
  /** The events' JSON objects joined by commas (a Version 2 body without its brackets). */
  body: string;
  eventCount: number;
  attempts: number;
  firstFailedAt: Date | null;
  createdAt: Date;
  claim: string;
  /** A Version 2 batch's event positions, as claimed (kept on its attempt rows: migration 0010). */
  positions?: readonly string[];
  target: { url: string; secret: string; version: CallbackUrlVersion; status: CallbackUrlStatus; isBackup: boolean; eventType: string };
}

/** The log positions of the first attempts among `rows` that were sent straight from the log. */
export const directPositions = (rows: readonly ClaimedDelivery[]): bigint[] => rows.flatMap((r) => (r.direct !== null ? [r.direct] : []));

export interface ClaimOptions {
  retry: boolean;
  /** Rows at most, over all URLs. */
  limit: number;
  /** Rows at most per URL, unless `room` says otherwise for it. */
  perUrl: number;
  /** URL id → rows it may still take (its free concurrency in this process). */
  room: ReadonlyMap<string, number>;
  /** Round-robin cursor: start with URLs after this id. */
  after: bigint;
  leaseMs: number;
  claim: string;
}

/**
 * Separators of the events column as it travels to Postgres: rows by U+001F, a row's events by
 * U+001E. Event JSON never holds them raw (JSON escapes every control character), so the text
 * needs no escaping and Postgres splits it with string_to_array — many times cheaper, for
 * both sides, than json_to_recordset over the same events.
 */
const ROW_SEPARATOR = '\u001f';
const EVENT_SEPARATOR = '\u001e';
// eslint-disable-next-line no-control-regex -- the separators are control characters by design
const SEPARATORS = /[\u001e\u001f]/;

/** Inserts deliveries; returns the id of each, by webhook id. */
export async function insertDeliveries(db: Kysely<Database>, rows: readonly NewDelivery[]): Promise<Map<string, bigint>> {
  if (rows.length === 0) return new Map();
  if (rows.some((r) => r.events.some((e) => SEPARATORS.test(e)))) throw new Error('a webhook event holds a raw U+001E or U+001F (not JSON text)');
  const events = rows.map((r) => r.events.join(EVENT_SEPARATOR)).join(ROW_SEPARATOR);
  // Every column as one text, split in Postgres (no array literal to escape or parse).
  const list = (f: (r: NewDelivery) => string | number) => rows.map(f).join(',');
  const result = await sql<{ id: bigint; webhook_id: string }>`
    INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, due_at)
    SELECT r.api_key_id, r.url_id, r.webhook_id, string_to_array(r.events, chr(30)), string_to_array(r.positions, ' ')::bigint[], r.bytes,
      now() + make_interval(secs => r.delay_ms / 1000.0)
    FROM unnest(string_to_array(${list((r) => String(r.apiKeyId))}::text, ',')::bigint[], string_to_array(${list((r) => String(r.urlId))}::text, ',')::bigint[],
      string_to_array(${list((r) => r.webhookId)}::text, ','), string_to_array(${events}::text, chr(31)), string_to_array(${list((r) => r.positions.join(' '))}::text, ','),
      string_to_array(${list((r) => r.bytes)}::text, ',')::int[], string_to_array(${list((r) => Math.round(r.delayMs))}::text, ',')::int[])
      AS r(api_key_id, url_id, webhook_id, events, positions, bytes, delay_ms)
    RETURNING id, webhook_id`.execute(db);
  return new Map(result.rows.map((r) => [r.webhook_id, BigInt(r.id)]));
}

export interface BatchAppend {
  id: bigint;
  urlId: bigint;
  events: readonly string[];
  positions: readonly bigint[];
  bytes: number;
  /** Now full: due at once. */
  full: boolean;
}

/**
 * Adds events to Version 2 batches still waiting for their window, in one statement. Returns
 * the ids appended to; a batch claimed meanwhile (or moved to another URL) is left alone and
 * the caller starts a new one with its events.
 */
export async function appendToBatches(db: Kysely<Database>, appends: readonly BatchAppend[]): Promise<Set<bigint>> {
  if (appends.length === 0) return new Set();
  const json = JSON.stringify(
    appends.map((a) => ({ id: String(a.id), url_id: String(a.urlId), events: a.events, positions: a.positions.map(String), bytes: a.bytes, is_full: a.full })),
  );
  const result = await sql<{ id: bigint }>`
    UPDATE webhook_deliveries AS w
    SET events = w.events || x.events, positions = w.positions || x.positions, bytes = w.bytes + x.bytes,
      due_at = CASE WHEN x.is_full THEN now() ELSE w.due_at END
    FROM json_to_recordset(${json}::json) AS x(id bigint, url_id bigint, events text[], positions bigint[], bytes integer, is_full boolean)
    WHERE w.id = x.id AND w.url_id = x.url_id AND w.claim IS NULL AND w.attempts = 0 AND w.due_at > now()
    RETURNING w.id`.execute(db);
  return new Set(result.rows.map((r) => BigInt(r.id)));
}

/**
 * Claims due deliveries of one lane, URL by URL (a loose index scan over the URLs with rows in
 * the lane, from the round-robin cursor), at most `room`/`perUrl` per URL, locking with
 * FOR UPDATE SKIP LOCKED so concurrent dispatchers never take the same row. A claim holds a
 * row until `claimed_until`: if its worker dies, the row is simply claimable again then.
 * Returns each row with its URL's current settings.
 */
export async function claimDue(db: Kysely<Database>, o: ClaimOptions): Promise<ClaimedDelivery[]> {
  const roomUrls = [...o.room.keys()];
  const roomRows = roomUrls.map((u) => o.room.get(u) ?? 0);
  const result = await sql<{
    id: bigint;
    api_key_id: bigint;
    url_id: bigint;
    webhook_id: string;
    body: string;
    event_count: number;
    attempts: number;
    first_failed_at: Date | null;
    created_at: Date;
    url: string;
    secret: string;
    version: number;
    status: CallbackUrlStatus;
    is_backup: boolean;
    event_type: string;
    positions: string | null;
  }>`
    WITH RECURSIVE urls(url_id) AS (
      (SELECT url_id FROM webhook_deliveries WHERE retry = ${o.retry} AND url_id > ${o.after} ORDER BY url_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.url_id FROM webhook_deliveries d WHERE d.retry = ${o.retry} AND d.url_id > urls.url_id ORDER BY d.url_id LIMIT 1)
      FROM urls WHERE urls.url_id IS NOT NULL
    ),
    picked AS (
      SELECT c.id FROM urls
      CROSS JOIN LATERAL (
        SELECT coalesce((SELECT r.room FROM unnest(${roomUrls}::bigint[], ${roomRows}::int[]) AS r(url_id, room) WHERE r.url_id = urls.url_id), ${o.perUrl}) AS room
      ) AS lim
      CROSS JOIN LATERAL (
        SELECT d.id FROM webhook_deliveries d
        WHERE d.retry = ${o.retry} AND d.url_id = urls.url_id AND d.due_at <= now() AND (d.claimed_until IS NULL OR d.claimed_until < now())
        ORDER BY d.due_at LIMIT lim.room
        FOR UPDATE SKIP LOCKED
      ) AS c
      WHERE urls.url_id IS NOT NULL AND lim.room > 0
      LIMIT ${o.limit}
    )
    UPDATE webhook_deliveries AS w
    SET claimed_until = now() + make_interval(secs => ${o.leaseMs} / 1000.0), claim = ${o.claim}
    FROM picked, callback_urls AS u
    WHERE w.id = picked.id AND u.id = w.url_id
    RETURNING w.id, w.api_key_id, w.url_id, w.webhook_id, array_to_string(w.events, ',') AS body, cardinality(w.events) AS event_count,
      CASE WHEN starts_with(w.webhook_id, ${sql.lit(BATCH_ID_PREFIX)}) THEN array_to_string(w.positions, ' ') END AS positions,
      w.attempts, w.first_failed_at, w.created_at, u.url, u.secret, u.version, u.status, u.is_backup, u.event_type`.execute(db);
  return result.rows
    .map((r) => ({
      id: BigInt(r.id),
      direct: null,
      apiKeyId: BigInt(r.api_key_id),
      urlId: BigInt(r.url_id),
      webhookId: r.webhook_id,
      body: r.body,
      eventCount: r.event_count,
      attempts: r.attempts,
      firstFailedAt: r.first_failed_at,
      createdAt: r.created_at,
      claim: o.claim,
      ...(r.positions !== null ? { positions: r.positions.split(' ') } : {}),
      target: { url: r.url, secret: r.secret, version: r.version === 2 ? (2 as const) : (1 as const), status: r.status, isBackup: r.is_backup, eventType: r.event_type },
    }))
    .sort((a, b) => (a.urlId === b.urlId ? 0 : a.urlId < b.urlId ? -1 : 1));
}

/** Gives claimed rows back (unclaimed, still due), e.g. for a URL found dead at claim time. */
export async function releaseClaims(db: Kysely<Database>, rows: readonly { id: bigint; claim: string }[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    UPDATE webhook_deliveries AS w SET claim = NULL, claimed_until = NULL
    FROM unnest(${rows.map((r) => String(r.id))}::bigint[], ${rows.map((r) => r.claim)}::text[]) AS x(id, claim)
    WHERE w.id = x.id AND w.claim = x.claim`.execute(db);
}

/** An outbox row for a direct first attempt (sent straight from the log, so it had none). */
export interface FreshRow {
  api_key_id: string;
  url_id: string;
  /** The type of its event: a URL since given another type does not take it. */
  event_type: string;
  webhook_id: string;
  body: string;
  position: string;
  bytes: number;
  retry: boolean;
  attempts: number;
  delay_ms: number;
  not_before_ms: number | null;
  failed_at: string | null;
}

export function freshRow(d: ClaimedDelivery, o: { retry: boolean; attempts: number; delayMs: number; notBeforeMs?: number | null; failedAt: Date | null }): FreshRow {
  return {
    api_key_id: String(d.apiKeyId),
    url_id: String(d.urlId),
    event_type: d.target.eventType,
    webhook_id: d.webhookId,
    body: d.body,
    position: String(d.direct ?? 0n),
    bytes: Buffer.byteLength(d.body),
    retry: o.retry,
    attempts: o.attempts,
    delay_ms: Math.round(o.delayMs),
    not_before_ms: o.notBeforeMs ?? null,
    failed_at: o.failedAt?.toISOString() ?? null,
  };
}

/**
 * A retry's due time: `delay_ms` from now, but no sooner than `not_before_ms` after the first
 * failure (`failedAt`, an SQL expression). Both in the database's clock, the one that claims rows
 * and kills URLs: a floor the dispatcher worked out from its own clock would come early by the
 * time since the transaction began (GREATEST skips the NULL of a retry with no floor).
 */
function dueAt(failedAt: string): RawBuilder<Date> {
  return sql<Date>`greatest(now() + make_interval(secs => x.delay_ms / 1000.0), ${sql.raw(failedAt)} + make_interval(secs => x.not_before_ms / 1000.0))`;
}

/**
 * Outbox rows for direct first attempts (rare: failures and hand-offs); returns their ids by
 * `url:webhook-id`. A row whose URL was deleted meanwhile, or given another event type, is not
 * written (deleting a URL deletes its rows; the URL's row is locked against that until this commits).
 */
export async function insertFreshRows(db: Kysely<Database>, rows: readonly FreshRow[]): Promise<Map<string, string>> {
  if (rows.length === 0) return new Map();
  const result = await sql<{ id: string; url_id: string; webhook_id: string }>`
    INSERT INTO webhook_deliveries (api_key_id, url_id, webhook_id, events, positions, bytes, retry, attempts, due_at, first_failed_at)
    SELECT x.api_key_id, x.url_id, x.webhook_id, ARRAY[x.body], ARRAY[x.position], x.bytes, x.retry, x.attempts,
      ${dueAt('x.failed_at')}, x.failed_at
    FROM json_to_recordset(${JSON.stringify(rows)}::json) AS x(api_key_id bigint, url_id bigint, event_type text, webhook_id text, body text, position bigint, bytes integer,
      retry boolean, attempts integer, delay_ms bigint, not_before_ms bigint, failed_at timestamptz)
      JOIN callback_urls AS u ON u.id = x.url_id AND u.event_type = x.event_type
    FOR KEY SHARE OF u
    RETURNING id::text AS id, url_id::text AS url_id, webhook_id`.execute(db);
  if (rows.some((r) => !r.retry)) await sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`.execute(db);
  return new Map(result.rows.map((r) => [`${r.url_id}:${r.webhook_id}`, r.id]));
}

/** An outbox row as its claim holder names it. */
export interface HeldRow {
  id: string;
  claim: string;
}

/** A held row of a dead URL, released with its attempts so far (the reroute's record names them). */
export interface ReleasedRow extends HeldRow {
  attempts: number;
  failed_at: string;
}

/** A held row's next try: its attempts so far, the delay before it (and the floor, RetryDecision), when it first failed. */
export interface RetryRow extends ReleasedRow {
  delay_ms: number;
  not_before_ms: number | null;
}

/**
 * The outcome writer's changes to rows it still holds (each matched by id and claim, so a row
 * claimed by another worker since is left alone): expired rows deleted, failed ones scheduled
 * for their next try, and those of a dead URL released for the reroute.
 */
export async function settleHeldRows(trx: Kysely<Database>, rows: { removed: readonly HeldRow[]; retries: readonly RetryRow[]; released: readonly ReleasedRow[] }): Promise<void> {
  const { removed, retries, released } = rows;
  if (removed.length > 0) {
    await sql`DELETE FROM webhook_deliveries AS w USING unnest(${removed.map((r) => r.id)}::bigint[], ${removed.map((r) => r.claim)}::text[]) AS x(id, claim)
      WHERE w.id = x.id AND w.claim = x.claim`.execute(trx);
  }
  if (retries.length > 0) {
    await sql`
      UPDATE webhook_deliveries AS w
      SET attempts = x.attempts, retry = true, claim = NULL, claimed_until = NULL, due_at = ${dueAt('coalesce(w.first_failed_at, x.failed_at)')},
          first_failed_at = coalesce(w.first_failed_at, x.failed_at)
      FROM json_to_recordset(${JSON.stringify(retries)}::json) AS x(id bigint, claim text, attempts integer, delay_ms bigint, not_before_ms bigint, failed_at timestamptz)
      WHERE w.id = x.id AND w.claim = x.claim`.execute(trx);
  }
  if (released.length > 0) {
    await sql`UPDATE webhook_deliveries AS w SET attempts = x.attempts, first_failed_at = coalesce(w.first_failed_at, x.failed_at), claim = NULL, claimed_until = NULL
      FROM json_to_recordset(${JSON.stringify(released)}::json) AS x(id bigint, claim text, attempts integer, failed_at timestamptz)
      WHERE w.id = x.id AND w.claim = x.claim`.execute(trx);
  }
}
