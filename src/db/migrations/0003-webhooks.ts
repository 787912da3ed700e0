import { type Kysely, sql } from 'kysely';

/**
 * Webhooks: each tenant's callback URLs (Mailjet's eventcallbackurl), the delivery outbox the
 * dispatcher fills from the log and drains over HTTP, and the record of every attempt.
 *
 * An outbox row is due when `due_at` has passed and it is not claimed (`claimed_until` unset or
 * past). Claiming stamps `claim` and `claimed_until`, columns no index covers, so the claim is a
 * HOT update; a row whose worker died is simply claimable again once its lease ends. The
 * outcome is written only by the holder of the matching `claim`. `retry` separates first
 * attempts from retries (two lanes with their own concurrency). The (retry, url_id, due_at)
 * index lets a claim visit URL by URL, so one endpoint's backlog is never scanned for another's.
 * No foreign key to callback_urls: deleting a URL deletes its rows in the same transaction,
 * and the per-row key-share lock of a foreign key would cost every insert.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE callback_urls (
      id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      api_key_id    bigint NOT NULL,
      event_type    text NOT NULL CHECK (event_type IN ('sent', 'open', 'click', 'bounce', 'blocked', 'spam', 'unsub')),
      is_backup     boolean NOT NULL DEFAULT false,
      status        text NOT NULL DEFAULT 'alive' CHECK (status IN ('alive', 'dead')),
      url           text NOT NULL,
      version       smallint NOT NULL DEFAULT 1 CHECK (version IN (1, 2)),
      secret        text NOT NULL,
      -- first failure since the last success (null while healthy), and the last success:
      -- a delivery out of retries kills its URL only if no success came after its first failure
      failing_since   timestamptz,
      last_success_at timestamptz,
      dead_since    timestamptz,
      created_at    timestamptz NOT NULL DEFAULT now(),
      updated_at    timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT callback_urls_key UNIQUE (api_key_id, event_type, is_backup)
    )`.execute(db);

  await sql`
    CREATE TABLE webhook_deliveries (
      id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      api_key_id      bigint NOT NULL,
      url_id          bigint NOT NULL,
      webhook_id      text NOT NULL,
      -- Mailjet callback objects as exact JSON text, one per event, with their log positions
      events          text[] NOT NULL,
      positions       bigint[] NOT NULL,
      bytes           integer NOT NULL,
      retry           boolean NOT NULL DEFAULT false,
      attempts        integer NOT NULL DEFAULT 0,
      due_at          timestamptz NOT NULL DEFAULT now(),
      claim           text,
      claimed_until   timestamptz,
      first_failed_at timestamptz,
      created_at      timestamptz NOT NULL DEFAULT now()
    ) WITH (fillfactor = 80)`.execute(db);
  await sql`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (retry, url_id, due_at)`.execute(db);

  await sql`
    CREATE TABLE webhook_attempts (
      id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      attempted_at     timestamptz NOT NULL,
      api_key_id       bigint NOT NULL,
      url_id           bigint NOT NULL,
      delivery_id      bigint NOT NULL,
      webhook_id       text NOT NULL,
      attempt          integer NOT NULL,
      event_count      integer NOT NULL,
      outcome          text NOT NULL CHECK (outcome IN ('delivered', 'failed', 'expired', 'dropped')),
      status_code      integer,
      latency_ms       integer NOT NULL,
      error_class      text,
      response_snippet text
    )`.execute(db);
  await sql`CREATE INDEX webhook_attempts_tenant_idx ON webhook_attempts (api_key_id, id)`.execute(db);
  await sql`CREATE INDEX webhook_attempts_time_brin ON webhook_attempts USING brin (attempted_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['webhook_attempts', 'webhook_deliveries', 'callback_urls']) {
    await sql`DROP TABLE IF EXISTS ${sql.table(table)} CASCADE`.execute(db);
  }
}
