import { type Kysely, sql } from 'kysely';
import type { Database } from '../db/schema.js';
import { WEBHOOK_EVENT_TYPES } from '../events/schema.js';
import type { CallbackUrlVersion, WebhookEventType } from './callback-url-input.js';
import { mailjetCallbackJson } from './mailjet-payload.js';
import { type BatchAppend as Append, type ClaimedDelivery, type NewDelivery, appendToBatches, insertDeliveries } from './outbox.js';
import { batchWebhookId, messageWebhookId } from './webhook-ids.js';

/**
 * Log events → outbox rows, in the caller's transaction. Each event goes to its tenant's alive
 * primary URL for its type or, while that one is dead, to the alive backup. Version 1 URLs get
 * one delivery per event (webhook-id `msg_<position>`, the same on every retry and replay): an
 * outbox row, or none when the caller has a free slot to send it itself after the commit (a
 * first attempt straight from the log, first-attempts-ledger.ts). Version 2
 * URLs get batches (`bat_<uuid>`) that stay open for the grouping window and up to a count and
 * a size, the events of several calls joining the same batch while it waits. The window counts
 * from the batch's first event entering the log, so events read late (a backlog, a replay)
 * are not held back again: a batch is due at most the window after its first event arrived.
 */

export interface GroupingLimits {
  readonly windowMs: number;
  readonly maxEvents: number;
  readonly maxBytes: number;
}

/** A log row as the dispatcher reads it (`payload` null when no URL can want it). */
export interface LogEventForWebhooks {
  position: bigint;
  api_key_id: bigint;
  type: string;
  event_time: bigint;
  message_id: string | null;
  campaign_id: bigint;
  contact_id: bigint;
  list_id: bigint;
  payload: string | null;
  /** Milliseconds since the event entered the log, when it was read (the database's clock). */
  age_ms: number;
}

/** A Version 2 batch still open for more events, as the enqueuer last left it. */
export interface OpenBatch {
  id: bigint;
  urlId: bigint;
  count: number;
  bytes: number;
  /** Local clock (ms) after which it no longer takes events. */
  closesAt: number;
}

interface BatchAppend extends Append {
  key: string;
  take: number;
  grown: OpenBatch;
}

interface Route {
  urlId: bigint;
  version: CallbackUrlVersion;
  url: string;
  secret: string;
  isBackup: boolean;
}

/**
 * Lets the caller send Version 1 first attempts itself, straight from the log, once the
 * transaction commits (no outbox row, no claim query, no body read back): `reserve` takes a
 * delivery slot for the URL, or says there is none (the event then gets an unclaimed outbox row).
 */
export interface FirstAttemptClaimer {
  reserve(urlId: bigint): boolean;
}

export interface EnqueueResult {
  deliveries: number;
  events: number;
  /** Open batches after this call, to pass to the next one once the transaction commits. */
  openBatches: Map<string, OpenBatch>;
  /** First attempts to send straight from the log (one per slot the claimer reserved), after the commit. */
  claimed: ClaimedDelivery[];
}

export interface EnqueueOptions {
  /**
   * Version 1 routes only (a recovery re-examining events whose Version 2 batches are enqueued
   * already), `except` for positions whose route may have changed since they were fanned out.
   */
  readonly versionOneOnly?: { readonly except: ReadonlySet<bigint> };
}

/** Milliseconds before a batch closes within which no more events join it. */
const CLOSE_MARGIN_MS = 100;

export const isWebhookType = (t: string): t is WebhookEventType => (WEBHOOK_EVENT_TYPES as readonly string[]).includes(t);

/**
 * SQL selecting log rows for `enqueueEvents`: the payload only where the tenant has a URL for
 * the event's type (most events of most tenants need nothing but their position).
 */
export const LOG_SELECT = sql`e.position, e.api_key_id, e.type, e.event_time, e.message_id::text AS message_id, e.campaign_id, e.contact_id, e.list_id,
  greatest(0, extract(epoch FROM statement_timestamp() - e.recorded_at) * 1000)::int AS age_ms,
  CASE WHEN EXISTS (SELECT 1 FROM callback_urls u WHERE u.api_key_id = e.api_key_id AND u.event_type = e.type) THEN e.payload::text END AS payload`;

/** The log rows after `after`, in position order, as `enqueueEvents` takes them. */
export async function readLogAfter(db: Kysely<Database>, after: bigint, limit: number): Promise<LogEventForWebhooks[]> {
  const { rows } = await sql<LogEventForWebhooks>`
    SELECT ${LOG_SELECT} FROM events e WHERE e.position > ${after} ORDER BY e.position LIMIT ${limit}`.execute(db);
  return rows;
}

export async function enqueueEvents(
  db: Kysely<Database>,
  events: readonly LogEventForWebhooks[],
  limits: GroupingLimits,
  open: ReadonlyMap<string, OpenBatch>,
  now: number = Date.now(),
  claimer: FirstAttemptClaimer | null = null,
  options: EnqueueOptions = {},
): Promise<EnqueueResult> {
  const wanted = events.filter((e) => e.payload !== null && isWebhookType(e.type));
  const openBatches = new Map(open);
  for (const [k, b] of openBatches) if (b.closesAt - CLOSE_MARGIN_MS <= now) openBatches.delete(k);
  if (wanted.length === 0) return { deliveries: 0, events: 0, openBatches, claimed: [] };

  const routes = await loadRoutes(db, [...new Set(wanted.map((e) => e.api_key_id))]);
  const single: NewDelivery[] = [];
  const handed: { delivery: NewDelivery; route: Route; type: string }[] = [];
  const grouped = new Map<string, { route: Route; apiKeyId: bigint; events: string[]; positions: bigint[]; sizes: number[]; ages: number[]; start: number }>();
  let routed = 0;
  for (const e of wanted) {
    const route = routes.get(`${e.api_key_id}:${e.type}`);
    if (route === undefined || (route.version !== 1 && options.versionOneOnly !== undefined && !options.versionOneOnly.except.has(e.position))) continue;
    routed += 1;
    const json = toCallbackJson(e);
    const bytes = Buffer.byteLength(json);
    if (route.version === 1) {
      const delivery: NewDelivery = { apiKeyId: e.api_key_id, urlId: route.urlId, webhookId: messageWebhookId(e.position), events: [json], positions: [e.position], bytes, delayMs: 0 };
      if (claimer?.reserve(route.urlId) === true) handed.push({ delivery, route, type: e.type });
      else single.push(delivery);
      continue;
    }
    const key = String(route.urlId);
    let g = grouped.get(key);
    if (g === undefined) grouped.set(key, (g = { route, apiKeyId: e.api_key_id, events: [], positions: [], sizes: [], ages: [], start: 0 }));
    g.events.push(json);
    g.ages.push(e.age_ms);
    g.positions.push(e.position);
    g.sizes.push(bytes);
  }

  // Events joining a URL's open batch: all such appends in one statement.
  const appends: BatchAppend[] = [];
  for (const [key, g] of grouped) {
    const current = openBatches.get(key);
    openBatches.delete(key);
    if (current === undefined) continue;
    const take = fit(g.sizes, 0, current.count, current.bytes, limits);
    if (take === 0) continue;
    const bytes = sum(g.sizes, 0, take);
    const grown = { ...current, count: current.count + take, bytes: current.bytes + bytes };
    appends.push({ key, take, grown, full: isFull(grown.count, grown.bytes, limits), id: current.id, urlId: g.route.urlId, events: g.events.slice(0, take), positions: g.positions.slice(0, take), bytes });
  }
  const appended = await appendToBatches(db, appends);
  for (const a of appends) {
    if (!appended.has(a.id)) continue;
    if (!a.full) openBatches.set(a.key, a.grown);
    const g = grouped.get(a.key);
    if (g !== undefined) g.start = a.take;
  }

  const batches: NewDelivery[] = [];
  let deliveries = single.length + handed.length;
  for (const g of grouped.values()) {
    let i = g.start;
    while (i < g.events.length) {
      const take = Math.max(1, fit(g.sizes, i, 0, 0, limits));
      const bytes = sum(g.sizes, i, i + take);
      batches.push({
        apiKeyId: g.apiKeyId,
        urlId: g.route.urlId,
        webhookId: batchWebhookId(),
        events: g.events.slice(i, i + take),
        positions: g.positions.slice(i, i + take),
        bytes,
        // A full batch goes at once; the others wait for what is left of the window to gather more.
        delayMs: i + take < g.events.length || isFull(take, bytes, limits) ? 0 : Math.max(0, limits.windowMs - (g.ages[i] ?? 0)),
      });
      i += take;
    }
  }
  const ids = await insertDeliveries(db, [...single, ...batches]);
  deliveries += batches.length;
  // The last new batch of each URL stays open if it has room.
  for (const b of batches) {
    const id = ids.get(b.webhookId);
    if (id === undefined) continue;
    if (b.delayMs > CLOSE_MARGIN_MS) openBatches.set(String(b.urlId), { id, urlId: b.urlId, count: b.events.length, bytes: b.bytes, closesAt: now + b.delayMs });
    else openBatches.delete(String(b.urlId));
  }
  const createdAt = new Date(now);
  const claimed = handed.map(
    ({ delivery: d, route, type }): ClaimedDelivery => ({
      id: 0n,
      direct: d.positions[0] ?? 0n,
      apiKeyId: d.apiKeyId,
      urlId: d.urlId,
      webhookId: d.webhookId,
      body: d.events[0] ?? '',
      eventCount: 1,
      attempts: 0,
      firstFailedAt: null,
      createdAt,
      claim: '',
      target: { url: route.url, secret: route.secret, version: 1, status: 'alive', isBackup: route.isBackup, eventType: type },
    }),
  );
  return { deliveries, events: routed, openBatches, claimed };
}

/**
 * A Version 2 body's size: `[`, the events (`bytes`, their sizes added up) with a comma between
 * each two, `]`.
 */
function bodyBytes(count: number, bytes: number): number {
  return count === 0 ? 2 : bytes + count + 1;
}

/** No room for one more (small) event. */
function isFull(count: number, bytes: number, limits: GroupingLimits): boolean {
  return count >= limits.maxEvents || bodyBytes(count, bytes) + 256 >= limits.maxBytes;
}

/** How many events from `from` fit a batch already holding `count` events and `bytes` (its body within maxBytes). */
function fit(sizes: readonly number[], from: number, count: number, bytes: number, limits: GroupingLimits): number {
  let n = 0;
  let b = bodyBytes(count, bytes);
  for (let i = from; i < sizes.length; i++) {
    // Every event after the batch's first comes with its comma.
    const size = (sizes[i] ?? 0) + (count + n > 0 ? 1 : 0);
    if (count + n + 1 > limits.maxEvents || b + size > limits.maxBytes) break;
    n += 1;
    b += size;
  }
  return n;
}

function sum(sizes: readonly number[], from: number, to: number): number {
  let s = 0;
  for (let i = from; i < to; i++) s += sizes[i] ?? 0;
  return s;
}

/** `tenant:type` → where its events go now: the alive primary, else (primary dead) the alive backup. */
async function loadRoutes(db: Kysely<Database>, tenants: readonly bigint[]): Promise<Map<string, Route>> {
  const rows = await db
    .selectFrom('callback_urls')
    .select(['id', 'api_key_id', 'event_type', 'is_backup', 'status', 'version', 'url', 'secret'])
    .where('api_key_id', 'in', tenants)
    .execute();
  const byKey = new Map<string, { primary?: (typeof rows)[number]; backup?: (typeof rows)[number] }>();
  for (const r of rows) {
    const key = `${r.api_key_id}:${r.event_type}`;
    const slot = byKey.get(key) ?? {};
    if (r.is_backup) slot.backup = r;
    else slot.primary = r;
    byKey.set(key, slot);
  }
  const routes = new Map<string, Route>();
  for (const [key, { primary, backup }] of byKey) {
    const target = primary?.status === 'alive' ? primary : primary?.status === 'dead' && backup?.status === 'alive' ? backup : undefined;
    if (target !== undefined) routes.set(key, { urlId: target.id, version: target.version === 2 ? 2 : 1, url: target.url, secret: target.secret, isBackup: target.is_backup });
  }
  return routes;
}

function toCallbackJson(e: LogEventForWebhooks): string {
  // Only the payload's text and boolean fields are read (ids come exactly from the columns),
  // so plain JSON.parse will do even where it rounds a 64-bit number.
  const payload: unknown = JSON.parse(e.payload ?? '{}');
  return mailjetCallbackJson({
    position: e.position,
    apiKeyId: e.api_key_id,
    type: e.type as WebhookEventType,
    time: e.event_time,
    messageId: e.message_id ?? '0',
    campaignId: e.campaign_id,
    contactId: e.contact_id,
    listId: e.list_id,
    payload: payload !== null && typeof payload === 'object' && !Array.isArray(payload) ? (payload as Record<string, unknown>) : {},
  });
}
