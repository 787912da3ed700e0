import { type Kysely, sql } from 'kysely';
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
  const result = await sql<{ api_key_id: bigint; event_id: string }>`
    INSERT INTO events (${sql.raw(COLUMN_LIST)})
    SELECT ${sql.raw(COLUMN_LIST)} FROM json_to_recordset(${batchJson(rows)}::json) AS r(${sql.raw(COLUMN_DEFINITIONS)})
    ON CONFLICT (api_key_id, event_id) DO NOTHING
    RETURNING api_key_id, event_id`.execute(db);
  return { inserted: new Set(result.rows.map((r) => eventKey(r.api_key_id, r.event_id))) };
}

function batchJson(rows: readonly LogEventRow[]): string {
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const { payload, payloadUtf8: _bytes, ...columns } = rows[i] as LogEventRow;
    parts[i] = `${JSON.stringify(columns).slice(0, -1)},"payload":${payload}}`;
  }
  return `[${parts.join(',')}]`;
}
