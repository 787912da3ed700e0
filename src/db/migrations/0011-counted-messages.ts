import { type Kysely, sql } from 'kysely';

const TABLES = ['campaign_stats', 'contact_stats', 'list_recipient_stats'];

/**
 * `messages` and `named` on the counter tables whose rows keep a one-way column: a row now also
 * holds the minimum or maximum of the messages whose events name it while they count elsewhere
 * (`otherValues` in projections/kit/message-facts.ts), and the API lists only the rows that count
 * a message (`messages` > 0). The projections' new versions rebuild these tables with the true
 * numbers at the projector's next start; until that rebuild swaps them in, every row an older
 * version built counts at least one message, which the default says. A database whose read models
 * are not built yet has no such tables, and the rebuild makes them as the specs say.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const table of TABLES) {
    await sql`ALTER TABLE IF EXISTS ${sql.table(table)}
      ADD COLUMN IF NOT EXISTS messages bigint NOT NULL DEFAULT 1, ADD COLUMN IF NOT EXISTS named bigint NOT NULL DEFAULT 1`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of TABLES) {
    await sql`ALTER TABLE IF EXISTS ${sql.table(table)} DROP COLUMN IF EXISTS messages, DROP COLUMN IF EXISTS named`.execute(db);
  }
}
