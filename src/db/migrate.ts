import { type Kysely, type Migration, type MigrationResult, Migrator } from 'kysely';
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

/** Brings the schema up to date; safe to run from several processes at once. */
export async function migrateToLatest(db: Kysely<Database>): Promise<MigrationResult[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    migrationTableName: 'mailtally_migrations',
    migrationLockTableName: 'mailtally_migrations_lock',
  });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((r) => r.status === 'Error');
    throw new MigrationError(failed?.migrationName ?? 'unknown', error);
  }
  return results;
}
