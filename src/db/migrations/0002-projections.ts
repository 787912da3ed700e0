import { type Kysely, sql } from 'kysely';

/**
 * The read side's footing. Projections fold each message's full event set, so the projector
 * fetches the events of the messages a batch touches: an index on (tenant, message). Campaign
 * metadata events are grouped by campaign. `projections` records which version of each read
 * model's code built its tables (a version bump triggers a rebuild); the read-model tables
 * themselves are declared by the projection files and created by the projector's schema step.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX events_message_idx ON events (api_key_id, message_id)`.execute(db);
  await sql`CREATE INDEX events_campaign_meta_idx ON events (api_key_id, campaign_id) WHERE type = 'campaign'`.execute(db);
  await sql`
    CREATE TABLE projections (
      name       text PRIMARY KEY,
      version    integer NOT NULL,
      built_at   timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE IF EXISTS projections`.execute(db);
  await sql`DROP INDEX IF EXISTS events_campaign_meta_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS events_message_idx`.execute(db);
}
