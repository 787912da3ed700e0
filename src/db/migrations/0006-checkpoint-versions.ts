import { type Kysely, sql } from 'kysely';

/**
 * A projection's checkpoint carries the version of the code its read models were built by (as
 * `projections.version` does), so that a live write can refuse, in its compare-and-set, to fold
 * with other code than built them: during a rolling upgrade a process of the old version still
 * runs while the new one rebuilds and swaps its tables in (see `writeDeltas` and `runner.ts`).
 * Null: not recorded (checkpoints of other readers, such as the webhook fan-out's).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS version integer`.execute(db);
  await sql`UPDATE checkpoints c SET version = p.version FROM projections p WHERE p.name = c.name`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE checkpoints DROP COLUMN IF EXISTS version`.execute(db);
}
