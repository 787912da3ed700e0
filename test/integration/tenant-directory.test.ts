import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { TenantDirectory } from '../../src/ingest/tenants.js';
import { createApiKey } from '../../src/keys/key-store.js';
import { openMigratedDb } from '../support/databases.js';

/** The tenants NATS ingest and `import` accept: a key made meanwhile at once, a key deleted after the directory's age. */

let db: Db;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ db, cleanup } = await openMigratedDb('postgres'));
});
afterAll(async () => cleanup?.());

const remove = (id: string) => db.kysely.deleteFrom('api_keys').where('api_key_id', '=', BigInt(id)).execute();

describe('TenantDirectory', () => {
  it('knows a key created after it loaded, at once', async () => {
    const tenants = new TenantDirectory(db.kysely);
    const first = await createApiKey(db.kysely);
    await tenants.ensureLoaded([first.APIKeyID]);
    const second = await createApiKey(db.kysely);
    await tenants.ensureLoaded([second.APIKeyID]);
    expect([tenants.knows(first.APIKeyID), tenants.knows(second.APIKeyID)]).toEqual([true, true]);
  });

  it('forgets a deleted key once what it loaded is older than its age, not before', async () => {
    const key = await createApiKey(db.kysely);
    const fresh = new TenantDirectory(db.kysely);
    const aging = new TenantDirectory(db.kysely, 200);
    await fresh.ensureLoaded([key.APIKeyID]);
    await aging.ensureLoaded([key.APIKeyID]);
    await remove(key.APIKeyID);
    await fresh.ensureLoaded([key.APIKeyID]);
    await aging.ensureLoaded([key.APIKeyID]);
    expect([fresh.knows(key.APIKeyID), aging.knows(key.APIKeyID)]).toEqual([true, true]);
    await new Promise((r) => setTimeout(r, 250));
    await aging.ensureLoaded([key.APIKeyID]);
    expect(aging.knows(key.APIKeyID)).toBe(false);
  });

  it('answers `knows` by the list it loaded however old (an import batch is judged by its own load), `knowsNow` only by a list within its age', async () => {
    const key = await createApiKey(db.kysely);
    const aging = new TenantDirectory(db.kysely, 200);
    await aging.ensureLoaded([key.APIKeyID]);
    expect([aging.knows(key.APIKeyID), aging.knowsNow(key.APIKeyID)]).toEqual([true, true]);
    await new Promise((r) => setTimeout(r, 250));
    expect([aging.knows(key.APIKeyID), aging.knowsNow(key.APIKeyID)]).toEqual([true, false]);
  });
});
