import type { Config } from '../config.js';
import { connectDb, type Db } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { createApiKey, listApiKeys, printableInfo, printableKey, revokeApiKey } from '../keys/key-store.js';

/** `mailtally keys create [--read-only]`: prints one JSON object; the secret is shown only here. */
export async function runKeysCreate(config: Config, readOnly: boolean): Promise<number> {
  return withDb(config, async (db) => {
    console.log(printableKey(await createApiKey(db.kysely, { readOnly })));
    return 0;
  });
}

/** `mailtally keys list`: every key, one JSON object a line, oldest first; no secrets (only their hashes are kept). */
export async function runKeysList(config: Config): Promise<number> {
  return withDb(config, async (db) => {
    for (const key of await listApiKeys(db.kysely)) console.log(printableInfo(key));
    return 0;
  });
}

/**
 * `mailtally keys revoke <APIKeyID|ApiKey>`: the key stops authenticating, in running
 * services at once. Prints the key as `keys list` does; a key not found is an error (exit 1).
 */
export async function runKeysRevoke(config: Config, key: string): Promise<number> {
  return withDb(config, async (db) => {
    const revoked = await revokeApiKey(db.kysely, key);
    if (revoked === null) {
      console.error(`keys revoke: no API key ${JSON.stringify(key)} (give its APIKeyID or its ApiKey, as \`keys list\` shows them)`);
      return 1;
    }
    console.log(printableInfo(revoked));
    return 0;
  });
}

async function withDb(config: Config, run: (db: Db) => Promise<number>): Promise<number> {
  const db = await connectDb(config.database, { application: 'mailtally:keys' });
  try {
    await migrateToLatest(db.kysely);
    return await run(db);
  } finally {
    await db.close();
  }
}
