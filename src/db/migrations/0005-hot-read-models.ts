import { type Kysely, sql } from 'kysely';

/**
 * `messages`, whose row nearly every event of a message rewrites, takes HOT updates: the index
 * on its status (which those events change) goes, and its pages keep a fifth free (see
 * `Fillfactor` in projections/kit/types.ts). Tables made from the projection's spec after this
 * already are so; this brings one made before it in line (the free space applies to pages
 * written from now on).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS messages__api_key_id_status_idx`.execute(db);
  await sql`ALTER TABLE IF EXISTS messages SET (fillfactor = 80)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE IF EXISTS messages RESET (fillfactor)`.execute(db);
  const exists = await sql<{ t: string | null }>`SELECT to_regclass('messages')::text AS t`.execute(db);
  if (exists.rows[0]?.t != null) await sql`CREATE INDEX IF NOT EXISTS messages__api_key_id_status_idx ON messages (api_key_id, status)`.execute(db);
}
