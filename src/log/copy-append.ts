import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Db } from '../db/connect.js';
import { APPEND_LOCK_KEY } from '../db/migrations/0001-event-log.js';
import type { NewDeadLetter } from '../db/schema.js';
import type { LogEventRow } from '../events/decode.js';
import { eventKey } from './append.js';
import { COLUMN_LIST, LOG_COLUMNS } from './columns.js';
import { deadLetterInsert } from './dead-letters.js';

/**
 * The bulk append path on real Postgres, in one transaction with the batch's dead letters:
 * take the log's append lock first, drop the events the log already holds (one indexed lookup
 * for the batch) and repeats within the batch, then COPY the rest straight into the log. While
 * the lock is held no other writer can insert (the statement trigger takes the same lock), so
 * the lookup stays true until the commit and the COPY cannot meet a duplicate. COPY's text
 * format is far cheaper to produce and to parse than parameters or JSON.
 */

const EXISTING = `
  SELECT e.api_key_id, e.event_id FROM events e
  JOIN unnest($1::bigint[], $2::text[]) AS b(api_key_id, event_id) USING (api_key_id, event_id)`;

export async function copyAppend(db: Db & { pool: pg.Pool }, rows: readonly LogEventRow[], letters: readonly NewDeadLetter[]): Promise<Set<string>> {
  return inTransaction(db.pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK_KEY.toString()]);
    const fresh = rows.length > 0 ? await withoutStored(client, rows) : [];
    if (fresh.length > 0) await copyRows(client, fresh);
    await insertDeadLetters(db, client, letters);
    return new Set(fresh.map((r) => eventKey(r.api_key_id, r.event_id)));
  });
}

/** The rows not yet in the log, each (tenant, EventID) once. */
async function withoutStored(client: pg.PoolClient, rows: readonly LogEventRow[]): Promise<LogEventRow[]> {
  const stored = await client.query<{ api_key_id: bigint; event_id: string }>(EXISTING, [rows.map((r) => r.api_key_id), rows.map((r) => r.event_id)]);
  const seen = new Set(stored.rows.map((r) => eventKey(r.api_key_id, r.event_id)));
  return rows.filter((r) => {
    const key = eventKey(r.api_key_id, r.event_id);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

async function copyRows(client: pg.PoolClient, rows: readonly LogEventRow[]): Promise<void> {
  await pipeline(
    async function* () {
      yield copyText(rows);
    },
    client.query(copyFrom(`COPY events (${COLUMN_LIST}) FROM STDIN`)),
  );
}

async function insertDeadLetters(db: Db, client: pg.PoolClient, letters: readonly NewDeadLetter[]): Promise<void> {
  if (letters.length === 0) return;
  const query = deadLetterInsert(db.kysely, letters).compile();
  await client.query(query.sql, [...query.parameters]);
}

async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** Rows in COPY's text format: tab-separated, \N for null, backslash escapes. */
function copyText(rows: readonly LogEventRow[]): string {
  let out = '';
  for (const row of rows) {
    for (let i = 0; i < LOG_COLUMNS.length; i++) {
      const v = row[(LOG_COLUMNS[i] as (typeof LOG_COLUMNS)[number])[0]];
      out += i === 0 ? '' : '\t';
      if (v === null) out += '\\N';
      else if (typeof v === 'string') out += NEEDS_ESCAPE.test(v) ? v.replace(ESCAPES, escapeChar) : v;
      else if (typeof v === 'boolean') out += v ? 't' : 'f';
      else out += String(v);
    }
    out += '\n';
  }
  return out;
}

const NEEDS_ESCAPE = /[\\\t\n\r]/;
const ESCAPES = /[\\\t\n\r]/g;
const escapeChar = (c: string): string => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r');
