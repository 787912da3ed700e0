import { type Kysely, sql } from 'kysely';

/**
 * `route_changed_at`: when a callback URL's version, status, event type or backup flag last
 * changed (a PUT may change each), set by a trigger however it was done. Its events went
 * elsewhere, or in another form, before: a dispatcher recovering first attempts that a crashed
 * one sent straight from the log cannot tell which were sent while the URL took Version 1
 * (fan-out-recovery.ts).
 *
 * A callback URL whose address, status, version, secret, event type or backup flag changes, or
 * that is deleted, sends NOTIFY `mailtally_callback_urls` (CALLBACK_URLS_CHANNEL in src/webhooks/url-changes.ts) with its
 * id, in the same transaction, however it was done (the API, the dispatcher turning it dead, an
 * operator's own SQL). A dispatcher holding first attempts for it that it took from the log
 * before the change sends none of them to what the URL was: it hands them to the outbox, whose
 * claims read the URL as it is now.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One statement per call: PGlite runs parameterless SQL as a prepared statement too.
  const statements = [
    `ALTER TABLE callback_urls ADD COLUMN route_changed_at timestamptz`,
    `CREATE FUNCTION mailtally_callback_url_route_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       NEW.route_changed_at := now();
       RETURN NEW;
     END $$`,
    `CREATE TRIGGER callback_urls_route_changed BEFORE UPDATE OF version, status, event_type, is_backup ON callback_urls
       FOR EACH ROW WHEN (NEW.version IS DISTINCT FROM OLD.version OR NEW.status IS DISTINCT FROM OLD.status
         OR NEW.event_type IS DISTINCT FROM OLD.event_type OR NEW.is_backup IS DISTINCT FROM OLD.is_backup)
       EXECUTE FUNCTION mailtally_callback_url_route_changed()`,
    `CREATE FUNCTION mailtally_callback_url_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       PERFORM pg_notify('mailtally_callback_urls', (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END)::text);
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER callback_urls_changed AFTER UPDATE OF url, status, version, secret, event_type, is_backup ON callback_urls
       FOR EACH ROW WHEN (NEW.url IS DISTINCT FROM OLD.url OR NEW.status IS DISTINCT FROM OLD.status
         OR NEW.version IS DISTINCT FROM OLD.version OR NEW.secret IS DISTINCT FROM OLD.secret
         OR NEW.event_type IS DISTINCT FROM OLD.event_type OR NEW.is_backup IS DISTINCT FROM OLD.is_backup)
       EXECUTE FUNCTION mailtally_callback_url_changed()`,
    `CREATE TRIGGER callback_urls_deleted AFTER DELETE ON callback_urls
       FOR EACH ROW EXECUTE FUNCTION mailtally_callback_url_changed()`,
  ];
  for (const statement of statements) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS callback_urls_deleted ON callback_urls`.execute(db);
  await sql`DROP TRIGGER IF EXISTS callback_urls_changed ON callback_urls`.execute(db);
  await sql`DROP FUNCTION IF EXISTS mailtally_callback_url_changed()`.execute(db);
  await sql`DROP TRIGGER IF EXISTS callback_urls_route_changed ON callback_urls`.execute(db);
  await sql`DROP FUNCTION IF EXISTS mailtally_callback_url_route_changed()`.execute(db);
  await sql`ALTER TABLE callback_urls DROP COLUMN IF EXISTS route_changed_at`.execute(db);
}
