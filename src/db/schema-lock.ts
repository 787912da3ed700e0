import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from './connect.js';

/** Held while a process sets up the schema (migrations, then read-model tables). */
export const SCHEMA_LOCK_KEY = 7_220_517_002n;
const LOCK_RETRY_MS = 200;

/**
 * Runs `setUp` while holding a session-level advisory lock on its own connection, so processes
 * starting at once set the schema up one after the other: `CREATE TABLE IF NOT EXISTS` run
 * concurrently fails on Postgres's catalog indexes (pg_class_relname_nsp_index) instead of
 * finding the table. The embedded database has one process: nothing to wait for.
 */
export async function withSchemaLock<T>(db: Db, setUp: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  if (db.pool === null) return setUp();
  const client = await db.pool.connect();
  const key = SCHEMA_LOCK_KEY.toString();
  try {
    // Tried again and again rather than waited for: a stop asked meanwhile ends the wait at
    // once (a backend blocked in pg_advisory_lock would wait on after its client left).
    while (!(await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [key])).rows[0]?.ok) {
      signal?.throwIfAborted();
      await sleep(LOCK_RETRY_MS, undefined, signal !== undefined ? { signal } : {});
    }
  } catch (err) {
    client.release();
    throw err;
  }
  try {
    return await setUp();
  } finally {
    // A connection that may still hold the lock is closed, never handed back to the pool.
    const unlocked = await client.query('SELECT pg_advisory_unlock($1)', [key]).then(() => true, () => false);
    client.release(!unlocked);
  }
}
