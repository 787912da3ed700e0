import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';

export async function runMigrate(config: Config): Promise<number> {
  const db = await connectDb(config.database, { application: 'mailtally:migrate' });
  try {
    const results = await migrateToLatest(db.kysely);
    if (results.length === 0) console.log('Schema is up to date.');
    for (const r of results) console.log(`${r.status === 'Success' ? 'applied' : r.status}: ${r.migrationName}`);
    return 0;
  } finally {
    await db.close();
  }
}
