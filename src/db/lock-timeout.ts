import { type Kysely, type Transaction, sql } from 'kysely';
import { isLockNotAvailable } from './errors.js';
import type { Database } from './schema.js';

/**
 * How long work that takes a lock the API's reads would queue behind (a swap, a migration's
 * ALTER, a DROP) waits for it before it steps back, so those reads go on.
 */
export const LOCK_WAIT_MS = 2_000;

/**
 * Runs `work` in a transaction whose every lock wait lasts at most `lockTimeoutMs` (0: a lock
 * not free at once, as NOWAIT), for work that takes a lock the API's reads would queue behind.
 * False, with nothing changed, if a lock did not come in time (lock_not_available, 55P03).
 */
export async function inTransactionIfLocksCome(db: Kysely<Database>, lockTimeoutMs: number, work: (trx: Transaction<Database>) => Promise<void>): Promise<boolean> {
  try {
    await db.transaction().execute(async (trx) => {
      // lock_timeout 0 would mean no limit: 1 ms is the shortest wait it takes.
      await sql`SELECT set_config('lock_timeout', ${`${Math.max(1, Math.round(lockTimeoutMs))}ms`}, true)`.execute(trx);
      await work(trx);
    });
    return true;
  } catch (err) {
    if (isLockNotAvailable(err)) return false;
    throw err;
  }
}
