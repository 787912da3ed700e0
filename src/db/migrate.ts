import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, type Migration, type MigrationResult, Migrator, sql } from 'kysely';
import * as eventLog from './migrations/0001-event-log.js';
import * as projections from './migrations/0002-projections.js';
import * as webhooks from './migrations/0003-webhooks.js';
import * as readModelNotify from './migrations/0004-read-model-notify.js';
import * as hotReadModels from './migrations/0005-hot-read-models.js';
import * as checkpointVersions from './migrations/0006-checkpoint-versions.js';
import * as customIdIndex from './migrations/0007-custom-id-index.js';
import * as keyRevocationNotify from './migrations/0008-key-revocation-notify.js';
import * as callbackUrlNotify from './migrations/0009-callback-url-notify.js';
import * as batchAttemptPositions from './migrations/0010-batch-attempt-positions.js';
import * as countedMessages from './migrations/0011-counted-messages.js';
import type { Logger } from '../logger.js';
import { isLockNotAvailable, isUndefinedTable } from './errors.js';
import { LOCK_WAIT_MS } from './lock-timeout.js';
import type { Database } from './schema.js';

/** Every migration, in order. Listed by hand: no file-system discovery at run time. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-event-log': eventLog,
  '0002-projections': projections,
  '0003-webhooks': webhooks,
  '0004-read-model-notify': readModelNotify,
  '0005-hot-read-models': hotReadModels,
  '0006-checkpoint-versions': checkpointVersions,
  '0007-custom-id-index': customIdIndex,
  '0008-key-revocation-notify': keyRevocationNotify,
  '0009-callback-url-notify': callbackUrlNotify,
  '0010-batch-attempt-positions': batchAttemptPositions,
  '0011-counted-messages': countedMessages,
};

export class MigrationError extends Error {
  constructor(
    readonly migration: string,
    cause: unknown,
  ) {
    super(`Migration ${migration} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'MigrationError';
  }
}

/**
 * How long a migration waits for a table's lock before it steps back: while an ALTER waits for a
 * long reader (an open transaction, a pg_dump), every read of that table queues behind it, the
 * API's included. It then tries again a moment later, reads having gone on meanwhile.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = LOCK_WAIT_MS;
const MIGRATION_RETRY_MS = 1_000;

export interface MigrateOptions {
  /** Called each time the migrations stepped back for a lock (`tries` so far). */
  readonly onLockWait?: (migration: string, tries: number) => void;
  /** Ends the wait between tries (a SIGTERM during a start). */
  readonly signal?: AbortSignal;
}

/** Tries of the migrations' bookkeeping when a table it looked at went meanwhile, and the pause between. */
const BOOKKEEPING_TRIES = 20;
const BOOKKEEPING_RETRY_MS = 50;

/**
 * Brings the schema up to date; safe to run from several processes at once. The pending
 * migrations run in one transaction, on one connection whose lock waits last at most
 * MIGRATION_LOCK_TIMEOUT_MS; one that did not get its lock is rolled back with the rest and tried
 * again, until it gets it.
 */
export async function migrateToLatest(db: Kysely<Database>, options: MigrateOptions = {}): Promise<MigrationResult[]> {
  const pause = (ms: number) => sleep(ms, undefined, options.signal !== undefined ? { signal: options.signal } : {});
  let bookkeeping = 0;
  for (let tries = 1; ; tries++) {
    const { error, results = [] } = await db.connection().execute(async (conn) => {
      await sql`SELECT set_config('lock_timeout', ${`${MIGRATION_LOCK_TIMEOUT_MS}ms`}, false)`.execute(conn);
      try {
        const migrator = new Migrator({
          db: conn,
          provider: { getMigrations: async () => MIGRATIONS },
          migrationTableName: 'mailtally_migrations',
          migrationLockTableName: 'mailtally_migrations_lock',
        });
        return await migrator.migrateToLatest();
      } finally {
        await sql`RESET lock_timeout`.execute(conn);
      }
    });
    if (error === undefined) return results;
    const failed = results.find((r) => r.status === 'Error')?.migrationName;
    // Before any migration ran, kysely's check for its own tables lists every table of the
    // schema and looks each up: one dropped meanwhile (a replay's shadow and work tables come and
    // go) fails it with undefined_table. Nothing was done; it is tried again a moment later.
    if (failed === undefined && isUndefinedTable(error) && ++bookkeeping < BOOKKEEPING_TRIES) {
      await pause(BOOKKEEPING_RETRY_MS);
      continue;
    }
    if (!isLockNotAvailable(error)) throw new MigrationError(failed ?? 'unknown', error);
    options.onLockWait?.(failed ?? 'unknown', tries);
    await pause(MIGRATION_RETRY_MS);
  }
}

/** A start's log of the migrations' lock waits: the first, then one every 30 tries. */
export function logLockWait(log: Logger): (migration: string, tries: number) => void {
  return (migration, tries) => {
    if (tries === 1 || tries % 30 === 0) {
      log.warn({ migration, tries }, "a migration waits for a table's lock (an open transaction reads it): stepping back so reads go on, trying again every second");
    }
  };
}
