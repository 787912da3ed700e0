import { type Kysely, sql } from 'kysely';
import type { CallbackUrlRow, Database } from '../db/schema.js';
import {
  type CallbackUrlFilters,
  type CallbackUrlStatus,
  type CallbackUrlVersion,
  type WebhookEventType,
  checkEventType,
  parseCallbackUrlCreate,
  parseCallbackUrlPatch,
} from './callback-url-input.js';
import { generateSigningSecret } from './signing.js';

/**
 * Each tenant's callback URLs (Mailjet's eventcallbackurl): at most one primary and one backup
 * per event type. Every function is scoped by the tenant's API key id: another tenant's URL is
 * indistinguishable from a missing one.
 */

export interface CallbackUrl {
  id: bigint;
  apiKeyId: bigint;
  eventType: WebhookEventType;
  isBackup: boolean;
  status: CallbackUrlStatus;
  url: string;
  version: CallbackUrlVersion;
  deadSince: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** Mailjet's wire shape, keys in Mailjet's (alphabetical) order; ids are bigints, written as bare integers. */
export type CallbackUrlWire = {
  APIKeyID: bigint;
  EventType: WebhookEventType;
  ID: bigint;
  IsBackup: boolean;
  Status: CallbackUrlStatus;
  Url: string;
  Version: CallbackUrlVersion;
};

/** A 400 for the client: invalid input or a duplicate (EventType, IsBackup). */
export class CallbackUrlError extends Error {
  readonly statusCode = 400;
  constructor(
    readonly kind: 'invalid' | 'conflict',
    message: string,
  ) {
    super(message);
    this.name = 'CallbackUrlError';
  }
}

export interface Page {
  limit: number;
  offset: number;
  /** By ID, highest first (default lowest first). */
  descending?: boolean;
}

type Id = bigint | number | string;

export function toWire(c: CallbackUrl): CallbackUrlWire {
  return { APIKeyID: c.apiKeyId, EventType: c.eventType, ID: c.id, IsBackup: c.isBackup, Status: c.status, Url: c.url, Version: c.version };
}

/** Creates a callback URL; `secret` (for verifying signatures) is returned here and never again. */
export async function createCallbackUrl(db: Kysely<Database>, apiKeyId: Id, input: unknown): Promise<{ callbackUrl: CallbackUrl; secret: string }> {
  const checked = parseCallbackUrlCreate(input);
  if (!checked.ok) throw new CallbackUrlError('invalid', checked.message);
  const c = checked.value;
  const secret = generateSigningSecret();
  const row = await withConflict(c, () =>
    db
      .insertInto('callback_urls')
      .values({
        api_key_id: BigInt(apiKeyId),
        event_type: c.eventType,
        is_backup: c.isBackup,
        status: c.status,
        url: c.url,
        version: c.version,
        secret,
        dead_since: c.status === 'dead' ? sql<Date>`now()` : null,
      })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
  return { callbackUrl: fromRow(row), secret };
}

export async function getCallbackUrl(db: Kysely<Database>, apiKeyId: Id, id: Id): Promise<CallbackUrl | null> {
  const key = parseId(id);
  if (key === null) return null;
  const row = await db.selectFrom('callback_urls').selectAll().where('api_key_id', '=', BigInt(apiKeyId)).where('id', '=', key).executeTakeFirst();
  return row === undefined ? null : fromRow(row);
}

/**
 * A page of the tenant's URLs, by ID, with the number matching the filters (parse a query
 * string's filters with `parseCallbackUrlFilters`).
 */
export async function listCallbackUrls(db: Kysely<Database>, apiKeyId: Id, f: CallbackUrlFilters, page: Page): Promise<{ rows: CallbackUrl[]; total: number }> {
  let q = db.selectFrom('callback_urls').where('api_key_id', '=', BigInt(apiKeyId));
  if (f.eventType !== undefined) q = q.where('event_type', '=', f.eventType);
  if (f.status !== undefined) q = q.where('status', '=', f.status);
  if (f.isBackup !== undefined) q = q.where('is_backup', '=', f.isBackup);
  if (f.version !== undefined) q = q.where('version', '=', f.version);
  const [rows, count] = await Promise.all([
    q.selectAll().orderBy('id', page.descending === true ? 'desc' : 'asc').limit(page.limit).offset(page.offset).execute(),
    q.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows.map(fromRow), total: Number(count.n) };
}

/**
 * PUT with PATCH semantics: only the given properties change. A new `Url` revives a dead URL
 * (Mailjet's way back), and so does `Status: "alive"`. Null when there is no such URL. One
 * transaction: a claim never sees the URL changed and its deliveries not yet.
 */
export async function updateCallbackUrl(db: Kysely<Database>, apiKeyId: Id, id: Id, input: unknown): Promise<CallbackUrl | null> {
  const checked = parseCallbackUrlPatch(input);
  if (!checked.ok) throw new CallbackUrlError('invalid', checked.message);
  const key = parseId(id);
  if (key === null) return null;
  const p = checked.value;
  const current = await getCallbackUrl(db, apiKeyId, key);
  if (current === null) return null;
  const status: CallbackUrlStatus = p.status ?? (p.url !== undefined ? 'alive' : current.status);
  // Revived, or given a new address: its failure streak starts afresh.
  const afresh = status === 'alive' && (current.status === 'dead' || p.url !== undefined);
  const row = await withConflict({ eventType: p.eventType ?? current.eventType, isBackup: p.isBackup ?? current.isBackup }, () =>
    db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('callback_urls')
        .set({
          ...(p.eventType !== undefined ? { event_type: p.eventType } : {}),
          ...(p.url !== undefined ? { url: p.url } : {}),
          ...(p.isBackup !== undefined ? { is_backup: p.isBackup } : {}),
          ...(p.version !== undefined ? { version: p.version } : {}),
          status,
          ...(status === 'alive' ? { dead_since: null, ...(afresh ? { failing_since: null } : {}) } : {}),
          ...(status === 'dead' && current.status === 'alive' ? { dead_since: sql<Date>`now()` } : {}),
          updated_at: sql<Date>`now()`,
        })
        .where('api_key_id', '=', BigInt(apiKeyId))
        .where('id', '=', key)
        .returningAll()
        .executeTakeFirst();
      if (updated === undefined) return undefined;
      if (updated.event_type !== current.eventType) {
        // Given another event type, the URL is no longer where its pending deliveries were going: they go, as on a DELETE.
        await sql`DELETE FROM webhook_deliveries WHERE retry = ANY(ARRAY[false, true]) AND url_id = ${key}`.execute(trx);
      } else if (afresh) {
        // Its waiting deliveries start their retry schedule afresh, at once, and the window that
        // would kill it again counts from their next failure, at the address as it is now. A
        // delivery in flight (claimed) keeps its count: its outcome is already on its way.
        await sql`UPDATE webhook_deliveries SET attempts = 0, first_failed_at = NULL, due_at = now()
          WHERE retry = ANY(ARRAY[false, true]) AND url_id = ${key} AND (claimed_until IS NULL OR claimed_until < now())`.execute(trx);
      }
      return updated;
    }),
  );
  return row === undefined ? null : fromRow(row);
}

/** Deletes the URL and its pending deliveries; false when there was no such URL. */
export async function deleteCallbackUrl(db: Kysely<Database>, apiKeyId: Id, id: Id): Promise<boolean> {
  const key = parseId(id);
  if (key === null) return false;
  return db.transaction().execute(async (trx) => {
    const result = await trx.deleteFrom('callback_urls').where('api_key_id', '=', BigInt(apiKeyId)).where('id', '=', key).executeTakeFirst();
    if ((result.numDeletedRows ?? 0n) === 0n) return false;
    await sql`DELETE FROM webhook_deliveries WHERE retry = ANY(ARRAY[false, true]) AND url_id = ${key}`.execute(trx);
    return true;
  });
}

function fromRow(row: CallbackUrlRow): CallbackUrl {
  return {
    id: row.id,
    apiKeyId: row.api_key_id,
    eventType: row.event_type as WebhookEventType,
    isBackup: row.is_backup,
    status: row.status,
    url: row.url,
    version: row.version === 2 ? 2 : 1,
    deadSince: row.dead_since,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * The ID an item path names: the ID itself, or the resource's unique key `EventType|Backup`
 * (Mailjet's metadata), as `open` (the primary URL for opens), `open|false` or `open|true` (the
 * backup; `1`/`0` too), names without regard to case. Null when it names none of the tenant's.
 */
export async function findCallbackUrlId(db: Kysely<Database>, apiKeyId: Id, id: string): Promise<bigint | null> {
  const numeric = parseId(id);
  if (numeric !== null) return numeric;
  const m = /^\s*([a-z]+)\s*(?:\|\s*(true|false|1|0)\s*)?$/i.exec(id);
  // The event type as a body may name it (`unsubscribe` too).
  const named = m === null ? null : checkEventType(m[1]);
  if (m === null || named === null || !named.ok) return null;
  const eventType = named.value;
  const isBackup = m[2] !== undefined && ['true', '1'].includes(m[2].toLowerCase());
  const row = await db
    .selectFrom('callback_urls')
    .select('id')
    .where('api_key_id', '=', BigInt(apiKeyId))
    .where('event_type', '=', eventType)
    .where('is_backup', '=', isBackup)
    .executeTakeFirst();
  return row === undefined ? null : BigInt(row.id);
}

/** An id from a path or a body: a positive integer that fits a bigint column, else null. */
export function parseId(id: Id): bigint | null {
  const text = String(id).trim();
  if (!/^\d{1,19}$/.test(text)) return null;
  const n = BigInt(text);
  return n > 0n && n <= 9_223_372_036_854_775_807n ? n : null;
}

async function withConflict<T>(key: { eventType: WebhookEventType; isBackup?: boolean }, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if ((err as { code?: unknown }).code === '23505') {
      const which = key.isBackup === true ? ' (backup URL)' : '';
      throw new CallbackUrlError('conflict', `MJ18 A Eventcallbackurl resource with value "${key.eventType}" for EventType already exists${which}.`);
    }
    throw err;
  }
}
