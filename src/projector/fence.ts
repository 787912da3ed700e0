import type { Kysely } from 'kysely';
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
