import type { Kysely } from 'kysely';
import type { Database, EventRow } from '../db/schema.js';

/**
 * Events after `position`, oldest first, at most `limit`. Because appends are serialized
 * (see the 0001 migration), a caller that resumes from the last position it saw never skips one.
 */
export async function readEventsAfter(db: Kysely<Database>, position: bigint, limit: number): Promise<EventRow[]> {
  return db.selectFrom('events').selectAll().where('position', '>', position).orderBy('position').limit(limit).execute();
}

/** The highest committed position (0 for an empty log). */
export async function logHead(db: Kysely<Database>): Promise<bigint> {
  const row = await db
    .selectFrom('events')
    .select((eb) => eb.fn.coalesce(eb.fn.max('position'), eb.lit(0)).as('head'))
    .executeTakeFirstOrThrow();
  return BigInt(row.head);
}
