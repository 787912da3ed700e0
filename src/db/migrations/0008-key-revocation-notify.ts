import { type Kysely, sql } from 'kysely';

/**
 * A key revoked (`revoked_at` set) or deleted sends NOTIFY `mailtally_keys` (KEYS_CHANNEL in
 * src/keys/key-store.ts) in the same transaction, however it was done: `keys revoke`, or an
 * operator's own SQL. Every process that checks credentials listens and forgets the checks it
 * keeps for a minute, so the key stops working at once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One statement per call: PGlite runs parameterless SQL as a prepared statement too.
  const statements = [
    `CREATE FUNCTION mailtally_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       PERFORM pg_notify('mailtally_keys', '');
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER api_keys_revoked AFTER UPDATE OF revoked_at ON api_keys
       FOR EACH ROW WHEN (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) EXECUTE FUNCTION mailtally_keys_changed()`,
    `CREATE TRIGGER api_keys_deleted AFTER DELETE ON api_keys
       FOR EACH STATEMENT EXECUTE FUNCTION mailtally_keys_changed()`,
  ];
  for (const statement of statements) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS api_keys_deleted ON api_keys`.execute(db);
  await sql`DROP TRIGGER IF EXISTS api_keys_revoked ON api_keys`.execute(db);
  await sql`DROP FUNCTION IF EXISTS mailtally_keys_changed()`.execute(db);
}
