import { type Kysely, sql } from 'kysely';

/**
 * The log positions of the events a Version 2 batch carried, on each of its attempt rows. A
 * delivered batch leaves the outbox; its attempts are then the only record of which events it
 * took, which a dispatcher recovering another's first attempts needs in order not to send them
 * again (fan-out-recovery.ts). Null for Version 1 deliveries, whose webhook-id names the event.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_attempts ADD COLUMN positions bigint[]`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_attempts DROP COLUMN IF EXISTS positions`.execute(db);
}
