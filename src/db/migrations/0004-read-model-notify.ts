import { type Kysely, sql } from 'kysely';

/**
 * Read models change only in transactions that also move a projection's checkpoint (live
 * batches, replay swaps). A trigger on `checkpoints` sends NOTIFY `mailtally_read_models` in
 * that same transaction, so listeners (the read API's response cache) hear of a change once it
 * is committed and visible. Postgres folds identical notifications of one transaction into one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION mailtally_read_models_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('mailtally_read_models', '');
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER checkpoints_notify_read_models
    AFTER INSERT OR UPDATE ON checkpoints
    FOR EACH ROW WHEN (NEW.name NOT LIKE 'webhook%')
    EXECUTE FUNCTION mailtally_read_models_changed()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS checkpoints_notify_read_models ON checkpoints`.execute(db);
  await sql`DROP FUNCTION IF EXISTS mailtally_read_models_changed()`.execute(db);
}
