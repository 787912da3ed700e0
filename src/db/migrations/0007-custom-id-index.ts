import { type Kysely, sql } from 'kysely';

/**
 * /message's `CustomID` filter: the log's delivery events (`sent`, `bounce`, `blocked`: every
 * message that left or was refused has one) indexed by tenant and the send-time custom id
 * they carry. Only events with a non-empty one are in the index, so tenants who set none pay
 * nothing for it on append. The partial predicate is repeated word for word in the filter's
 * query (`customIdCondition`, src/api/routes/message.ts), which lets the planner use the index
 * whatever value is asked for.
 *
 * Building it reads the whole log once, and appends wait for it meanwhile: on a large log,
 * run the upgrade at a quiet hour.
 */
export const CUSTOM_ID_PREDICATE = `type IN ('sent', 'bounce', 'blocked') AND (payload->>'CustomID') <> ''`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS events_custom_id_idx ON events (api_key_id, (payload->>'CustomID')) WHERE ${sql.raw(CUSTOM_ID_PREDICATE)}`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS events_custom_id_idx`.execute(db);
}
