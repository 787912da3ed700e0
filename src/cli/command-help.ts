/**
 * `mailtally <command> --help` and `mailtally help <command>`: one command's usage, what it does,
 * its options with their defaults, the settings it reads and its exit codes. The overview of
 * every command is USAGE in src/cli.ts; configuration is .env.example and the README.
 */

const SETTINGS_DB = `DATABASE_URL (Postgres; unset: the embedded database under DATA_DIR, default ./data)`;

export const COMMAND_HELP: Readonly<Record<string, string>> = {
  serve: `Usage: mailtally serve [--roles api,ingest,projector,dispatcher]

Runs the service: the HTTP server (GET /healthz, /status and /metrics whatever the roles) and
the roles asked for.
  api         the Mailjet-compatible read API (/v3/REST), /v1/webhooks/*, OpenAPI at /docs
  ingest      POST /v1/events, and the NATS consumer when NATS_URL is set
  projector   keeps the read models up to date with the log
  dispatcher  sends webhooks to the tenants' callback URLs

Options:
  --roles LIST   comma-separated roles (default: all four; several processes may split them)

Settings: ${SETTINGS_DB}, NATS_URL, PORT (3000), HOST (127.0.0.1), TLS_CERT and TLS_KEY,
SHUTDOWN_TIMEOUT_MS (30000); every other one in .env.example.

SIGTERM or Ctrl-C stops taking work, drains the roles and exits 0 after "stopped". A second
signal within a second is the same stop; a later one exits at once (143 for SIGTERM, 130 for
SIGINT) without finishing the drain: unacked NATS messages are redelivered, nothing is lost.

Exit codes: 0 stopped; 1 failed to start or failed while running (a bad setting, a database or
NATS server not reachable, the port taken); 2 the command line is wrong.`,

  migrate: `Usage: mailtally migrate

Brings the database schema up to date (the event log, the read models, webhooks), printing each
migration applied, or "Schema is up to date.". \`serve\` does the same at start; this is for
deployments that migrate in a step of their own.

Settings: ${SETTINGS_DB}.

Exit codes: 0 done; 1 failed (the database not reachable, a migration failed: nothing of it
is kept); 2 the command line is wrong.`,

  keys: `Usage: mailtally keys create [--read-only]
       mailtally keys list
       mailtally keys revoke <APIKeyID|ApiKey>

API keys: the Basic-auth credentials of /v3/REST, /v1/webhooks/* and POST /v1/events, and the
tenant each event belongs to.
  create   makes a key and prints {"APIKeyID","ApiKey","SecretKey","ReadOnly"}: the secret is
           shown this once (it is stored as a scrypt hash)
           --read-only: the key may read, not write (403 on writes and on POST /v1/events)
  list     every key, one JSON line each, without secrets
  revoke   the key stops authenticating at once in running services; its data is kept

Settings: ${SETTINGS_DB}.

Exit codes: 0 done; 1 failed (the database not reachable, no such key to revoke); 2 the
command line is wrong.`,

  publish: `Usage: mailtally publish <file.jsonl> [--api-key-id N] [--url URL]

Sends a file of events (one JSON object per line) the way producers do: to NATS JetStream when
NATS_URL is set, else to the HTTP ingest (POST /v1/events, requests of at most 1000 events and
16 MiB; one answered 503 is sent again for about 30 s). Prints a summary line.

Options:
  --api-key-id N   the tenant of events that carry no APIKeyID (NATS only: over HTTP the
                   events are the tenant of MAILTALLY_API_KEY)
  --url URL        the HTTP ingest's base URL (default http(s)://HOST:PORT)

Settings: NATS_URL, NATS_STREAM, NATS_SUBJECT_PREFIX; without NATS: MAILTALLY_API_KEY and
MAILTALLY_SECRET_KEY, HOST, PORT.

Exit codes: 0 done; 1 failed (NATS or the server not reachable, the credentials refused; over
HTTP a failure after requests went through prints the summary too, StoppedAtLine the first
line not sent);
2 the command line is wrong (a missing file, --url with NATS_URL set, a file whose first
event carries no APIKeyID without --api-key-id over NATS, an --api-key-id naming no key when
DATABASE_URL is set); 3 lines skipped (each listed with
its reason in the summary); 130 stopped by Ctrl-C (the summary counts what was sent; a rerun
stores the rest, each event once).`,

  import: `Usage: mailtally import <file.jsonl> [--api-key-id N] [--batch-size N]

Loads a file of events (one JSON object per line) straight into the log, in large batches,
with a progress bar; the read models follow when the projector runs. Rerunning it is safe:
what is stored already counts as Duplicates. Lines that are not valid events are
dead-lettered with their reasons (see \`mailtally dead-letters\`).

Options:
  --api-key-id N   the tenant of events that carry no APIKeyID (it must name a key)
  --batch-size N   events per write (default 5000, at most 50000)

Settings: ${SETTINGS_DB}; INGEST_BATCH_BYTES (a write also ends at this many bytes of events,
default 8 MiB).

Exit codes: 0 done; 1 failed (the database not reachable); 2 the command line is wrong (a
missing file, an --api-key-id naming no key, a file whose first event carries no APIKeyID
without --api-key-id); 3 lines rejected (counted in the summary);
130 stopped by Ctrl-C (the summary counts what was written; a rerun stores the rest).`,

  replay: `Usage: mailtally replay [--projection name[,name]]

Rebuilds read models from the log into shadow tables while the live ones keep serving, catches
up with what arrived meanwhile, then swaps them in at once, with a progress bar. Prints a JSON
summary line. Safe to interrupt and run again: the live tables stay as they were.

Options:
  --projection LIST   the read models to rebuild, comma-separated (default: all); the names
                      are those of projections/index.ts (an unknown one is refused, listing them)

Settings: ${SETTINGS_DB}, REPLAY_ENGINE (sql, or fold), REPLAY_WORK_MEM, REPLAY_BATCH_SIZE,
REPLAY_COUNTER_ROWS.

Exit codes: 0 done; 1 failed (the database not reachable, another replay of the same read
model running); 2 the command line is wrong; 130 stopped by Ctrl-C (the live tables untouched).`,

  'dead-letters': `Usage: mailtally dead-letters [--limit N]

Lists rejected input with its reason, one JSON line each: the newest N, printed oldest first.
Each has its source (nats, http, import), the tenant when known, and the raw bytes as received.

Options:
  --limit N   how many (default 100)

Settings: ${SETTINGS_DB}.

Exit codes: 0 done; 1 failed (the database not reachable); 2 the command line is wrong.`,
};
