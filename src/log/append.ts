import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../db/schema.js';
import type { LogEventRow } from '../events/decode.js';
import { COLUMN_DEFINITIONS, COLUMN_LIST } from './columns.js';

export interface AppendResult {
  /** `api_key_id:event_id` of each row that was new; the others were duplicates. */
  readonly inserted: ReadonlySet<string>;
}

export const eventKey = (apiKeyId: string | bigint, eventId: string): string => `${apiKeyId}:${eventId}`;

/**
 * Appends a batch to the log in one statement, skipping events already stored (by tenant and
 * EventID). The batch travels as one JSON document that Postgres unpacks with json_to_recordset:
 * the raw payload text is spliced in untouched, so 64-bit numbers in it stay exact.
 * Call inside the caller's transaction when other writes (dead letters) must commit with it.
 */
export async function appendEvents(db: Kysely<Database>, rows: readonly LogEventRow[]): Promise<AppendResult> {
  if (rows.length === 0) return { inserted: new Set() };
  const result = await db.executeQuery<{ api_key_id: bigint; event_id: string }>(CompiledQuery.raw(`${APPEND} RETURNING api_key_id, event_id`, [batchJson(rows)]));
  return { inserted: new Set(result.rows.map((r) => eventKey(r.api_key_id, r.event_id))) };
}

/** The append: the batch as one JSON document ($1), each event stored unless its (tenant, EventID) already is. */
const APPEND = `
  INSERT INTO events (${COLUMN_LIST})
  SELECT ${COLUMN_LIST} FROM json_to_recordset($1::json) AS r(${COLUMN_DEFINITIONS})
  ON CONFLICT (api_key_id, event_id) DO NOTHING`;

/**
 * A small batch on Postgres: the same INSERT as `appendEvents`, on its own (autocommit: the
 * statement is the transaction, so the append lock its trigger takes is released by the commit
 * that ends it, never held across a round trip) and without RETURNING; prepared once per
 * connection. One round trip, against three for the COPY path (BEGIN, COPY, INSERT + COMMIT),
 * and no staging table to empty at the commit. Returns how many rows were new.
 */
export async function appendInOneStatement(pool: pg.Pool, rows: readonly LogEventRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const result = await pool.query({ name: 'mailtally-append-one-statement', text: APPEND, values: [batchJson(rows)] });
  return result.rowCount ?? 0;
}

function batchJson(rows: readonly LogEventRow[]): string {
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const { payload, payloadUtf8: _bytes, ...columns } = rows[i] as LogEventRow;
    parts[i] = `${JSON.stringify(columns).slice(0, -1)},"payload":${payload}}`;
  }
  return `[${parts.join(',')}]`;
}
