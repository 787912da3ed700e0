import { connectDb, type Db } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import type { Cleanup } from '../support/cleanup.js';
import { createScratchDatabase } from '../support/scratch.js';

/** A new migrated database for one phase of the webhook benchmark, dropped by `drop` (or by the cleanup). */
export async function scratchDb(cleanup: Cleanup): Promise<{ db: Db; url: string; drop: () => Promise<void> }> {
  const scratch = await createScratchDatabase('mt_bench_hooks');
  const dropDb = cleanup.add('scratch database', () => scratch.drop());
  const db = await connectDb({ kind: 'postgres', url: scratch.url, poolSize: 4 }, { application: 'mailtally:bench' });
  await migrateToLatest(db.kysely);
  return {
    db,
    url: scratch.url,
    drop: async () => {
      await db.close();
      await dropDb();
    },
  };
}
