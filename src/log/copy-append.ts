import { finished } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Db } from '../db/connect.js';
import type { NewDeadLetter } from '../db/schema.js';
import type { LogEventRow } from '../events/decode.js';
import { COLUMN_DEFINITIONS, COLUMN_LIST } from './columns.js';
import { type CopyBody, encodeCopyRows } from './copy-text.js';
import { deadLetterChunks, deadLetterInsert } from './dead-letters.js';

/**
 * The bulk append path on real Postgres, in one transaction with the batch's dead letters.
 *
 * Only one writer can append at a time (the log's append lock, which the statement trigger takes
 * for any insert), so the work done while holding it bounds every writer's throughput. Hence:
 * 1. Before the lock: the batch is COPYed into a session-local staging table (no indexes, no
 *    WAL): the parsing of the text rows and of the payloads happens while another writer may hold
 *    the lock. Repeats within the batch are rare and not looked for here (a key per row cost more
 *    than the few lines they add): the INSERT below skips them like any other duplicate.
 * 2. Then one message: `INSERT INTO events SELECT … FROM staging ON CONFLICT DO NOTHING;
 *    COMMIT`. The trigger takes the lock inside the INSERT and COMMIT releases it, so the lock is
 *    never held across a round trip to this process; the unique index drops the events the log
 *    already holds, and the INSERT's row count says how many were new (no RETURNING: every
 *    caller needs only the count, and sending the keys back cost both sides per row).
 */

const STAGING = 'mailtally_append_staging';
/** Created once per connection; emptied by every commit or rollback. */
const CREATE_STAGING = `CREATE TEMP TABLE IF NOT EXISTS ${STAGING} (${COLUMN_DEFINITIONS}) ON COMMIT DELETE ROWS`;
const COPY = `COPY ${STAGING} (${COLUMN_LIST}) FROM STDIN`;
const APPEND_AND_COMMIT = `
  INSERT INTO events (${COLUMN_LIST}) SELECT ${COLUMN_LIST} FROM ${STAGING}
  ON CONFLICT (api_key_id, event_id) DO NOTHING;
  COMMIT`;

/** Pool connections that already have the staging table (a replaced connection gets it anew). */
const staged = new WeakSet<pg.PoolClient>();

/** Appends the rows (and writes the dead letters) in one transaction; returns how many rows were new. */
export async function copyAppend(db: Db & { pool: pg.Pool }, rows: readonly LogEventRow[], letters: readonly NewDeadLetter[]): Promise<number> {
  const body = rows.length > 0 ? encodeCopyRows(rows) : null;
  const client = await db.pool.connect();
  let broken = false;
  try {
    if (body !== null && !staged.has(client)) {
      await client.query(CREATE_STAGING);
      staged.add(client);
    }
    await client.query('BEGIN');
    for (const chunk of deadLetterChunks(letters)) {
      const query = deadLetterInsert(db.kysely, chunk).compile();
      await client.query(query.sql, [...query.parameters]);
    }
    if (body === null) {
      await client.query('COMMIT');
      return 0;
    }
    await copy(client, body);
    const results = (await client.query(APPEND_AND_COMMIT)) as unknown as pg.QueryResult[];
    return results[0]?.rowCount ?? 0;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

function copy(client: pg.PoolClient, body: CopyBody): Promise<void> {
  const stream = client.query(copyFrom(COPY));
  stream.end(body.buf.subarray(0, body.length));
  return finished(stream);
}
