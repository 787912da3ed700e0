import { finished } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Db } from '../db/connect.js';
import { APPEND_LOCK_KEY } from '../db/migrations/0001-event-log.js';
import type { NewDeadLetter } from '../db/schema.js';
import type { LogEventRow } from '../events/decode.js';
import { eventKey } from './append.js';
import { COLUMN_LIST } from './columns.js';
import { type CopyBody, encodeCopyRows, keepRows } from './copy-text.js';
import { deadLetterInsert } from './dead-letters.js';

/**
 * The bulk append path on real Postgres, in one transaction with the batch's dead letters: drop
 * the events the log already holds and repeats within the batch, then COPY the rest straight
 * into the log. COPY's text format is far cheaper to produce and to parse than parameters or JSON.
 *
 * Only one writer can append at a time (the log's append lock, which the statement trigger takes
 * for any insert), so the work done while holding it bounds every writer's throughput. Hence:
 * 1. Before the lock, with the rows already encoded, one indexed lookup of the batch's keys in
 *    index order (another writer may be appending meanwhile), which also reads the highest
 *    position it saw.
 * 2. Under the lock (taken in the same message as BEGIN), only the rows appended since that
 *    position are read back — a short range of the primary key — and the batch's keys are
 *    checked against them too. Positions become visible in commit order (the same lock), so
 *    any row the lookup could not see lies above the position it read.
 * 3. The COPY of what is new, the dead letters, COMMIT. While the lock is held no other writer
 *    can insert, so what the two reads found stays true until the commit and the COPY cannot
 *    meet a duplicate.
 */

const COPY = `COPY events (${COLUMN_LIST}) FROM STDIN`;
const LOOKUP = `
  WITH stored AS (
    SELECT e.api_key_id::text AS api_key_id, e.event_id FROM events e
    JOIN unnest($1::bigint[], $2::text[]) AS b(api_key_id, event_id) USING (api_key_id, event_id))
  SELECT api_key_id, event_id, NULL AS horizon FROM stored
  UNION ALL SELECT NULL, NULL, (SELECT coalesce(max(position), 0) FROM events)::text`;
/** The range read back under the lock: always by the primary key, even on a table without statistics. */
const sinceLookup = (horizon: string) => `
  BEGIN; SET LOCAL enable_seqscan = off; SELECT pg_advisory_xact_lock(${APPEND_LOCK_KEY});
  SELECT api_key_id::text AS api_key_id, event_id FROM events WHERE position > ${horizon}`;

interface StoredKey {
  api_key_id: string;
  event_id: string;
}

export async function copyAppend(db: Db & { pool: pg.Pool }, rows: readonly LogEventRow[], letters: readonly NewDeadLetter[]): Promise<Set<string>> {
  const body = rows.length > 0 ? encodeCopyRows(rows) : null;
  const client = await db.pool.connect();
  let broken = false;
  try {
    const stored: StoredKey[] = [];
    if (rows.length > 0) {
      const keys = sortedKeys(rows);
      const found = await client.query<StoredKey & { horizon: string | null }>(LOOKUP, [keys.map((r) => r.api_key_id), keys.map((r) => r.event_id)]);
      let horizon = '0';
      for (const r of found.rows) {
        if (r.horizon !== null) horizon = r.horizon;
        else stored.push(r);
      }
      if (!/^\d+$/.test(horizon)) throw new Error(`unexpected highest position ${horizon}`);
      const since = (await client.query(sinceLookup(horizon))) as unknown as pg.QueryResult<StoredKey>[];
      for (const r of since[3]?.rows ?? []) stored.push(r);
    } else {
      await client.query('BEGIN'); // dead letters alone need no lock
    }
    const fresh = freshRows(rows, stored);
    if (body !== null && fresh.length > 0) await copy(client, keepRows(body, fresh));
    if (letters.length > 0) {
      const query = deadLetterInsert(db.kysely, letters).compile();
      await client.query(query.sql, [...query.parameters]);
    }
    await client.query('COMMIT');
    return new Set(fresh.map((i) => eventKey((rows[i] as LogEventRow).api_key_id, (rows[i] as LogEventRow).event_id)));
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The batch's keys in the unique index's order: its probes then walk the index instead of jumping about. */
function sortedKeys(rows: readonly LogEventRow[]): LogEventRow[] {
  const byId = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  return [...rows].sort((a, b) => byId(a.api_key_id, b.api_key_id) || (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
}

/** Indexes of the rows not yet in the log, each (tenant, EventID) once. */
function freshRows(rows: readonly LogEventRow[], stored: readonly StoredKey[]): number[] {
  const seen = new Set(stored.map((r) => eventKey(r.api_key_id, r.event_id)));
  const fresh: number[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as LogEventRow;
    const key = eventKey(row.api_key_id, row.event_id);
    if (seen.has(key)) continue;
    seen.add(key);
    fresh.push(i);
  }
  return fresh;
}

function copy(client: pg.PoolClient, body: CopyBody): Promise<void> {
  const stream = client.query(copyFrom(COPY));
  stream.end(body.buf.subarray(0, body.length));
  return finished(stream);
}
