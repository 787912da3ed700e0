import { type Kysely, sql } from 'kysely';

/**
 * The log positions of the events a Version 2 batch carried, on each of its attempt rows. A
 * delivered batch leaves the outbox; its attempts are then the only record of which events it
 * took, which a dispatcher recovering another's first attempts needs in order not to send them
 * again (fan-out-recovery.ts). Null for Version 1 deliveries, whose webhook-id names the event.
 *
 * And the triggers of 0009 also fire when a URL's event type or its backup flag changes (a PUT
 * may change both): the events it takes change then, as with its version or status.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One statement per call: PGlite runs parameterless SQL as a prepared statement too.
  const statements = [
    `ALTER TABLE webhook_attempts ADD COLUMN positions bigint[]`,
    `DROP TRIGGER callback_urls_route_changed ON callback_urls`,
    `CREATE TRIGGER callback_urls_route_changed BEFORE UPDATE OF version, status, event_type, is_backup ON callback_urls
       FOR EACH ROW WHEN (NEW.version IS DISTINCT FROM OLD.version OR NEW.status IS DISTINCT FROM OLD.status
         OR NEW.event_type IS DISTINCT FROM OLD.event_type OR NEW.is_backup IS DISTINCT FROM OLD.is_backup)
       EXECUTE FUNCTION mailtally_callback_url_route_changed()`,
    `DROP TRIGGER callback_urls_changed ON callback_urls`,
    `CREATE TRIGGER callback_urls_changed AFTER UPDATE OF url, status, version, secret, event_type, is_backup ON callback_urls
       FOR EACH ROW WHEN (NEW.url IS DISTINCT FROM OLD.url OR NEW.status IS DISTINCT FROM OLD.status
         OR NEW.version IS DISTINCT FROM OLD.version OR NEW.secret IS DISTINCT FROM OLD.secret
         OR NEW.event_type IS DISTINCT FROM OLD.event_type OR NEW.is_backup IS DISTINCT FROM OLD.is_backup)
       EXECUTE FUNCTION mailtally_callback_url_changed()`,
  ];
  for (const statement of statements) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webhook_attempts DROP COLUMN IF EXISTS positions`.execute(db);
}
