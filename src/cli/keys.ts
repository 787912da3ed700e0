import type { Config } from '../config.js';
import { connectDb } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { createApiKey, printableKey } from '../keys/key-store.js';

/** `mailtally keys create [--read-only]`: prints one JSON object; the secret is shown only here. */
export async function runKeysCreate(config: Config, readOnly: boolean): Promise<number> {
  const db = await connectDb(config.database, { application: 'mailtally:keys' });
  try {
    await migrateToLatest(db.kysely);
    console.log(printableKey(await createApiKey(db.kysely, { readOnly })));
    return 0;
  } finally {
    await db.close();
  }
}
