import { sql } from 'kysely';
import type { Db } from './connect.js';
import { describeError } from './errors.js';
import type { Logger } from '../logger.js';

/** How often the embedded database is vacuumed and checkpointed. */
export const EMBEDDED_MAINTENANCE_MS = 10 * 60_000;

/**
 * What a Postgres server's background processes do and the embedded database (PGlite, one
 * backend in single-user mode) has no process for: VACUUM, so the space of deleted and updated
 * rows is used again (the webhook outbox, whose rows all go once delivered, grew to 229 MB of
 * dead rows without it, and 9 MB after one), and CHECKPOINT, so the write-ahead log is recycled
 * instead of growing to `max_wal_size` (1 GB). Each round holds the thread while it runs (about
 * a second per few hundred MB to vacuum); a round that fails is logged and tried at the next.
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
