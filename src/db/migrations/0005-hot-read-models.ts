import { type Kysely, sql } from 'kysely';

/**
 * The read models whose rows most events rewrite (`messages`, `contact_stats`,
 * `list_recipient_stats`) take HOT updates: their often-changing column's index goes (status,
 * last activity) and their pages keep a fifth free (see `Fillfactor` in projections/kit/types.ts).
 * Tables made from the projections' specs after this already are so; this brings those made
 * before it in line (the free space applies to pages written from now on).
 */
const TABLES = ['messages', 'contact_stats', 'list_recipient_stats'] as const;
const INDEXES = [
  ['messages', 'messages__api_key_id_status_idx', 'api_key_id, status'],
  ['contact_stats', 'contact_stats__api_key_id_last_activity_at_idx', 'api_key_id, last_activity_at'],
  ['list_recipient_stats', 'list_recipient_stats__api_key_id_last_activity_at_idx', 'api_key_id, last_activity_at'],
] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const [, index] of INDEXES) await sql.raw(`DROP INDEX IF EXISTS ${index}`).execute(db);
  for (const table of TABLES) await sql.raw(`ALTER TABLE IF EXISTS ${table} SET (fillfactor = 80)`).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of TABLES) await sql.raw(`ALTER TABLE IF EXISTS ${table} RESET (fillfactor)`).execute(db);
  for (const [table, index, columns] of INDEXES) {
    const exists = await sql<{ t: string | null }>`SELECT to_regclass(${table}) AS t`.execute(db);
    if (exists.rows[0]?.t != null) await sql.raw(`CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${columns})`).execute(db);
  }
}
