import { sql } from 'kysely';
import type { Db } from './connect.js';
import { describeError } from './errors.js';
import type { Logger } from '../logger.js';

/** How often the embedded database is vacuumed and checkpointed. */
const EMBEDDED_MAINTENANCE_MS = 10 * 60_000;

/**
 * What a Postgres server's background processes do and the embedded database (PGlite, one
 * backend in single-user mode) has no process for: VACUUM, so the space of deleted and updated
 * rows is used again (the webhook outbox, whose rows all go once delivered, grew to 229 MB of
 * dead rows without it, and 9 MB after one), and CHECKPOINT: between checkpoints the write-ahead
 * log grew past `max_wal_size` (256 MB here, connect.ts), and a checkpoint brings it back (209
 * MB with a 96 MB setting, 97 MB after one, in a development script). Each round holds the
 * thread while it runs; a round that fails is logged and tried at the next.
 */
export async function maintainEmbedded(db: Db): Promise<void> {
  await sql`VACUUM`.execute(db.kysely);
  await sql`CHECKPOINT`.execute(db.kysely);
}

/** Runs `maintainEmbedded` every `everyMs` on the embedded database; returns its stop. */
export function startEmbeddedMaintenance(db: Db, log: Logger, everyMs = EMBEDDED_MAINTENANCE_MS): () => Promise<void> {
  if (db.kind !== 'pglite') return async () => {};
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running !== null) return;
    const started = performance.now();
    running = maintainEmbedded(db)
      .then(() => log.debug({ ms: Math.round(performance.now() - started) }, 'embedded database vacuumed and checkpointed'))
      .catch((err: unknown) => log.warn({ err: describeError(err) }, 'embedded database maintenance failed; trying again at the next round'))
      .finally(() => {
        running = null;
      });
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
