import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { withSchemaLock } from '../db/schema-lock.js';
import { PROJECTIONS } from '../../projections/index.js';
import { ensureProjectionTables } from '../projector/tables.js';

export async function runMigrate(config: Config): Promise<number> {
  const db = await connectDb(config.database, { application: 'mailtally:migrate' });
  try {
    const { results, stale } = await withSchemaLock(db, async () => {
      const results = await migrateToLatest(db.kysely, {
        onLockWait: (migration, tries) => {
          if (tries === 1) console.error(`Migration ${migration} waits for a table's lock (an open transaction reads it); stepping back so reads go on, trying again every second`);
        },
      });
      return { results, stale: await ensureProjectionTables(db.kysely, PROJECTIONS) };
    });
    if (results.length === 0) console.log('Schema is up to date.');
    for (const r of results) console.log(`${r.status === 'Success' ? 'applied' : r.status}: ${r.migrationName}`);
    if (stale.length > 0) console.log(`Read models to rebuild (run \`mailtally replay\`, or start a projector): ${stale.map((p) => p.name).join(', ')}`);
    return 0;
  } finally {
    await db.close();
  }
}
