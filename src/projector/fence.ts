import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from '../db/schema.js';
import type { Queryable } from '../log/leases.js';

/**
 * Called at the end of each of a rebuild's write transactions, before it commits, on that
 * transaction (kysely's, or a pg client's): throws, so that it rolls back, unless the rebuild
 * still holds its leases, which it then keeps locked until the commit. A rebuild that stood still
 * past its leases while another replay took them over so never writes into the shadow tables
 * that one made (a check before each step would leave the gap between the check and the write).
 */
export type Fence = (on: Kysely<Database> | Queryable) => Promise<void>;

/** `run` on a pooled connection within a transaction, committed past the `fence` (if any); rolled back if either throws. */
export async function inFencedTransaction<T>(pool: pg.Pool, fence: Fence | undefined, run: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await run(client);
    await fence?.(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
