import { type Kysely, sql } from 'kysely';

/**
 * The write side: the append-only event log, dead letters, checkpoints, leases and API keys.
 *
 * Appends are serialized by a transaction-level advisory lock that a statement trigger takes
 * before any identity value is drawn, so positions become visible in commit order: a reader
 * that has seen position p has seen every smaller position that will ever commit.
 */
const APPEND_LOCK_KEY = 7_220_517_001n;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE api_keys (
      api_key_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      public_key  text NOT NULL UNIQUE,
      secret_hash text NOT NULL,
      read_only   boolean NOT NULL DEFAULT false,
      created_at  timestamptz NOT NULL DEFAULT now(),
      revoked_at  timestamptz
    )`.execute(db);

  await sql`
    CREATE TABLE events (
      position         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      event_id         text NOT NULL CHECK (length(event_id) BETWEEN 1 AND 128),
      api_key_id       bigint NOT NULL,
      type             text NOT NULL,
      event_time       bigint NOT NULL,
      message_id       numeric(20,0) CHECK (message_id >= 0 AND message_id <= 18446744073709551615),
      email            text,
      recipient_domain text,
      esp              text,
      campaign_id      bigint NOT NULL DEFAULT 0,
      contact_id       bigint NOT NULL DEFAULT 0,
      list_id          bigint NOT NULL DEFAULT 0,
      sender_id        bigint NOT NULL DEFAULT 0,
      sender           text,
      sender_domain    text,
      custom_campaign  text,
      url              text,
      ua_platform      text,
      ua_client        text,
      geo              text,
      hard_bounce      boolean,
      blocked          boolean,
      error_related_to text,
      error            text,
      state_id         smallint,
      nats_seq         bigint,
      recorded_at      timestamptz NOT NULL DEFAULT now(),
      payload          jsonb NOT NULL,
      CONSTRAINT events_event_id_key UNIQUE (api_key_id, event_id)
    )`.execute(db);
  await sql`CREATE INDEX events_recorded_at_brin ON events USING brin (recorded_at)`.execute(db);

  // One statement per call: PGlite runs parameterless SQL as a prepared statement too.
  const triggers = [
    `CREATE FUNCTION events_serialize_appends() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       PERFORM pg_advisory_xact_lock(${APPEND_LOCK_KEY});
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER events_serialize_appends BEFORE INSERT ON events
       FOR EACH STATEMENT EXECUTE FUNCTION events_serialize_appends()`,
    `CREATE FUNCTION events_notify_append() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       PERFORM pg_notify('mailtally_events', '');
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER events_notify_append AFTER INSERT ON events
       FOR EACH STATEMENT EXECUTE FUNCTION events_notify_append()`,
    `CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       RAISE EXCEPTION 'the event log is append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
     END $$`,
    `CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events
       FOR EACH ROW EXECUTE FUNCTION events_append_only()`,
    `CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
       FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()`,
  ];
  for (const statement of triggers) await sql.raw(statement).execute(db);

  await sql`
    CREATE TABLE dead_letters (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      received_at timestamptz NOT NULL DEFAULT now(),
      source      text NOT NULL CHECK (source IN ('nats', 'http', 'import')),
      subject     text,
      api_key_id  bigint,
      nats_seq    bigint,
      -- stream, sequence and stream timestamp of a NATS message: the same for every redelivery,
      -- different for a new message even if the stream was re-created and sequences restarted
      message_key text UNIQUE,
      reason      text NOT NULL,
      raw         bytea NOT NULL
    )`.execute(db);

  await sql`
    CREATE TABLE checkpoints (
      name       text PRIMARY KEY,
      position   bigint NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE leases (
      name        text PRIMARY KEY,
      owner       text NOT NULL,
      expires_at  timestamptz NOT NULL,
      acquired_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['leases', 'checkpoints', 'dead_letters', 'events', 'api_keys']) {
    await sql`DROP TABLE IF EXISTS ${sql.table(table)} CASCADE`.execute(db);
  }
  for (const fn of ['events_serialize_appends', 'events_notify_append', 'events_append_only']) {
    await sql`DROP FUNCTION IF EXISTS ${sql.raw(fn)}()`.execute(db);
  }
}
